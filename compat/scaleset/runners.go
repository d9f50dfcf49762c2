package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/actions/scaleset"
)

func jitConfig(ctx context.Context, r *run, c *scaleset.Client, setID int, name string) (*scaleset.RunnerScaleSetJitRunnerConfig, error) {
	jit, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: name, WorkFolder: "_work"}, setID)
	if err != nil {
		return nil, err
	}
	r.secret(jit.EncodedJITConfig)
	return jit, nil
}

// runnerSteps: JIT configs, runners by id and by name, a job's life, removal.
func runnerSteps(ctx context.Context, r *run, s *sim) {
	c, err := s.patClient(s.orgURL())
	if err != nil {
		r.fail("runner-client", err)
		return
	}
	set, m, err := listening(ctx, r, c, "runners")
	if err != nil {
		r.fail("runner-scale-set", err)
		return
	}
	defer m.sc.Close(ctx)
	name := unique("Runner-Mixed-Case")
	var jit *scaleset.RunnerScaleSetJitRunnerConfig

	r.step(ctx, "jit-config", func(ctx context.Context) error {
		jit, err = jitConfig(ctx, r, c, set.ID, name)
		if err != nil {
			return err
		}
		return check(jit.Runner != nil && jit.Runner.ID > 0 && jit.Runner.Name == name &&
			jit.Runner.RunnerScaleSetID == set.ID && jit.EncodedJITConfig != "",
			"runner %+v, JIT config present: %t", jit.Runner, jit.EncodedJITConfig != "")
	})
	if jit == nil {
		return
	}
	id := jit.Runner.ID

	r.step(ctx, "jit-config-name-taken", func(ctx context.Context) error {
		_, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: name}, set.ID)
		return wantErr(err, scaleset.RunnerExistsError)
	})

	r.step(ctx, "jit-config-name-taken-other-case", func(ctx context.Context) error {
		_, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: strings.ToLower(name)}, set.ID)
		return wantErr(err, scaleset.RunnerExistsError)
	})

	r.step(ctx, "runner-by-id", func(ctx context.Context) error {
		got, err := c.GetRunner(ctx, id)
		if err != nil {
			return err
		}
		return check(got.ID == id && got.Name == name && got.RunnerScaleSetID == set.ID, "got %+v", *got)
	})

	r.step(ctx, "runner-by-name", func(ctx context.Context) error {
		got, err := c.GetRunnerByName(ctx, name)
		if err != nil {
			return err
		}
		if err := check(got != nil && got.ID == id, "got %+v, want id %d", got, id); err != nil {
			return err
		}
		missing, err := c.GetRunnerByName(ctx, "no-such-runner")
		return check(err == nil && missing == nil, "unknown name: %+v, %v; want nil, nil", missing, err)
	})

	r.step(ctx, "runner-by-name-other-case", func(ctx context.Context) error {
		// A client that got RunnerExistsError for "runner-a" looks "runner-a" up to reuse or
		// remove it: the name that conflicted must be found.
		got, err := c.GetRunnerByName(ctx, strings.ToLower(name))
		if err != nil {
			return err
		}
		return check(got != nil && got.ID == id, "lookup of %q: got %+v, want id %d", strings.ToLower(name), got, id)
	})

	var jobID string
	r.step(ctx, "job-started-statistics", func(ctx context.Context) error {
		jobs, err := s.enqueue(ctx, 1, []string{set.Name}, nil)
		if err != nil {
			return err
		}
		jobID = jobs[0]
		if err := m.until(ctx, 10*time.Second, "JobAssigned", func() bool { return len(m.assigned) >= 1 }); err != nil {
			return err
		}
		conn, err := s.connectRunner(ctx, jit.EncodedJITConfig)
		if err != nil {
			return err
		}
		if err := check(conn.RunnerID == id && conn.JobID != nil && *conn.JobID == jobID, "connected %+v", conn); err != nil {
			return err
		}
		if err := m.until(ctx, 10*time.Second, "JobStarted", func() bool { return len(m.started) >= 1 }); err != nil {
			return err
		}
		started, st := m.started[0], m.stats
		return check(started.JobID == jobID && started.RunnerID == id && started.RunnerName == name &&
			st.TotalAssignedJobs == 1 && st.TotalRunningJobs == 1 && st.TotalBusyRunners == 1 &&
			st.TotalRegisteredRunners == 1 && st.TotalIdleRunners == 0 && st.TotalAvailableJobs == 0,
			"started %+v, statistics %+v", *started, *st)
	})

	r.step(ctx, "remove-busy-runner-refused", func(ctx context.Context) error {
		return wantErr(c.RemoveRunner(ctx, int64(id)), scaleset.JobStillRunningError)
	})

	r.step(ctx, "job-completed-runner-gone", func(ctx context.Context) error {
		if jobID == "" {
			return fmt.Errorf("no running job (job-started-statistics failed)")
		}
		if err := s.ctl(ctx, "POST", "/jobs/"+jobID+"/complete", map[string]any{"result": "succeeded"}, nil); err != nil {
			return err
		}
		if err := m.until(ctx, 10*time.Second, "JobCompleted", func() bool { return len(m.completed) >= 1 }); err != nil {
			return err
		}
		done := m.completed[0]
		if err := check(done.JobID == jobID && done.Result == "succeeded" && done.RunnerID == id && done.RunnerName == name &&
			m.stats.TotalAssignedJobs == 0 && m.stats.TotalRegisteredRunners == 0,
			"completed %+v, statistics %+v", *done, *m.stats); err != nil {
			return err
		}
		_, err := c.GetRunner(ctx, id)
		return wantErr(err, scaleset.RunnerNotFoundError)
	})

	r.step(ctx, "remove-idle-runner", func(ctx context.Context) error {
		idle, err := jitConfig(ctx, r, c, set.ID, unique("idle"))
		if err != nil {
			return err
		}
		conn, err := s.connectRunner(ctx, idle.EncodedJITConfig)
		if err != nil {
			return err
		}
		if conn.JobID != nil {
			return fmt.Errorf("the idle runner got job %s", *conn.JobID)
		}
		if err := c.RemoveRunner(ctx, int64(idle.Runner.ID)); err != nil {
			return err
		}
		_, err = c.GetRunner(ctx, idle.Runner.ID)
		if err := wantErr(err, scaleset.RunnerNotFoundError); err != nil {
			return err
		}
		return wantErr(c.RemoveRunner(ctx, int64(idle.Runner.ID)), scaleset.RunnerNotFoundError)
	})

	r.step(ctx, "remove-registered-runner", func(ctx context.Context) error {
		// A runner whose pod never started: registered, never connected.
		never, err := jitConfig(ctx, r, c, set.ID, unique("never-started"))
		if err != nil {
			return err
		}
		if err := c.RemoveRunner(ctx, int64(never.Runner.ID)); err != nil {
			return err
		}
		gone, err := c.GetRunnerByName(ctx, never.Runner.Name)
		return check(err == nil && gone == nil, "after removal: %+v, %v", gone, err)
	})
}
