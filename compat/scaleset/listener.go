package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/actions/scaleset"
	"github.com/actions/scaleset/listener"
)

// scaler is a minimal ARC: it keeps min(assigned jobs, max) runners alive, each one a JIT
// config run by the simulator's fake runner (connect, take a job, finish it).
type scaler struct {
	r     *run
	s     *sim
	c     *scaleset.Client
	setID int
	max   int

	mu        sync.Mutex
	live      int
	started   int
	completed int
	err       error
	wg        sync.WaitGroup
}

func (x *scaler) HandleJobStarted(ctx context.Context, job *scaleset.JobStarted) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.started++
	return nil
}

func (x *scaler) HandleJobCompleted(ctx context.Context, job *scaleset.JobCompleted) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.completed++
	return nil
}

func (x *scaler) HandleDesiredRunnerCount(ctx context.Context, count int) (int, error) {
	target := min(count, x.max)
	x.mu.Lock()
	need := target - x.live
	if need > 0 {
		x.live += need
	}
	x.mu.Unlock()
	for range need {
		jit, err := jitConfig(ctx, x.r, x.c, x.setID, unique("listener-runner"))
		if err != nil {
			x.mu.Lock()
			x.live--
			x.err = err
			x.mu.Unlock()
			continue
		}
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			err := x.s.runRunner(context.Background(), jit.EncodedJITConfig, 0.2, 3)
			var ce *ctlError
			if errors.As(err, &ce) && ce.status == 408 {
				// No job for it: scale down, as ARC deletes an idle ephemeral runner.
				err = x.c.RemoveRunner(context.Background(), int64(jit.Runner.ID))
			}
			x.mu.Lock()
			defer x.mu.Unlock()
			x.live--
			if err != nil && x.err == nil {
				x.err = err
			}
		}()
	}
	return target, nil
}

// listenerSteps run upstream's own listener loop, with a scaler behind it, until a backlog
// larger than the scale set's maximum has run, in both modes.
func listenerSteps(ctx context.Context, r *run, sims ...*sim) {
	for _, s := range sims {
		var mode struct{ Mode string }
		if err := s.ctl(ctx, "GET", "/health", nil, &mode); err != nil {
			r.fail("listener-mode", err)
			continue
		}
		r.step(ctx, "listener-drains-backlog-"+mode.Mode, func(ctx context.Context) error {
			return drainBacklog(ctx, r, s, 6, 2)
		})
	}
}

func drainBacklog(ctx context.Context, r *run, s *sim, jobs, maxRunners int) error {
	c, err := s.patClient(s.orgURL())
	if err != nil {
		return err
	}
	set, err := newScaleSet(ctx, c, "listener")
	if err != nil {
		return err
	}
	defer c.DeleteRunnerScaleSet(context.Background(), set.ID)
	sc, err := c.MessageSessionClient(ctx, set.ID, "conformance-listener")
	if err != nil {
		return err
	}
	r.secret(sc.Session().MessageQueueAccessToken)
	defer sc.Close(context.Background())
	l, err := listener.New(sc, listener.Config{ScaleSetID: set.ID, MaxRunners: maxRunners})
	if err != nil {
		return err
	}
	x := &scaler{r: r, s: s, c: c, setID: set.ID, max: maxRunners}
	ids, err := s.enqueue(ctx, jobs, []string{set.Name}, nil)
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx, x) }()

	// Until every job is completed and the listener has been told of each: the last
	// JobCompleted message reaches it a poll after the job's state changes.
	waitErr := waitFor(ctx, 40*time.Second, fmt.Sprintf("%d jobs to complete with at most %d runners, each JobCompleted delivered", jobs, maxRunners), func() (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("listener stopped: %w", err)
		default:
		}
		for _, id := range ids {
			job, err := s.job(ctx, id)
			if err != nil || job.State != "completed" {
				return false, err
			}
		}
		x.mu.Lock()
		delivered := x.completed >= jobs
		x.mu.Unlock()
		return delivered, nil
	})
	stop()
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(10 * time.Second):
		runErr = fmt.Errorf("listener did not stop within 10 s of its context's end")
	}
	x.wg.Wait()
	if waitErr != nil {
		states := map[string]int{}
		for _, id := range ids {
			job, _ := s.job(ctx, id)
			states[job.State]++
		}
		return fmt.Errorf("%w (job states %v, JobStarted %d, JobCompleted %d)", waitErr, states, x.started, x.completed)
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return fmt.Errorf("listener: %w", runErr)
	}
	if x.err != nil {
		return fmt.Errorf("scaler: %w", x.err)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return check(x.completed == jobs, "JobCompleted messages %d, want %d", x.completed, jobs)
}
