package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/actions/scaleset"
)

func requestIDs(msgs []*scaleset.JobAvailable) []int64 {
	ids := make([]int64, 0, len(msgs))
	for _, m := range msgs {
		ids = append(ids, m.RunnerRequestID)
	}
	return ids
}

// acquireSteps: GHES's mode, the service offers jobs (JobAvailable) and a listener acquires them.
func acquireSteps(ctx context.Context, r *run, s *sim) {
	c, err := s.patClient(s.orgURL())
	if err != nil {
		r.fail("acquire-client", err)
		return
	}

	r.step(ctx, "acquire-job-available-then-assigned", func(ctx context.Context) error {
		set, m, err := listening(ctx, r, c, "acquire")
		if err != nil {
			return err
		}
		defer m.sc.Close(ctx)
		jobs, err := s.enqueue(ctx, 1, []string{set.Name}, nil)
		if err != nil {
			return err
		}
		if err := m.until(ctx, 10*time.Second, "JobAvailable", func() bool { return len(m.available) >= 1 }); err != nil {
			return err
		}
		offer := m.available[0]
		if err := check(offer.JobID == jobs[0] && offer.RunnerRequestID > 0 &&
			strings.Contains(offer.AcquireJobURL, fmt.Sprintf("/runnerscalesets/%d/acquirejobs", set.ID)) &&
			m.stats.TotalAvailableJobs == 1 && m.stats.TotalAssignedJobs == 0,
			"offer %+v, statistics %+v", *offer, *m.stats); err != nil {
			return err
		}
		got, err := m.sc.AcquireJobs(ctx, []int64{offer.RunnerRequestID})
		if err != nil {
			return err
		}
		if !slices.Equal(got, []int64{offer.RunnerRequestID}) {
			return fmt.Errorf("acquired %v, want [%d]", got, offer.RunnerRequestID)
		}
		if err := m.until(ctx, 10*time.Second, "JobAssigned", func() bool { return len(m.assigned) >= 1 }); err != nil {
			return err
		}
		return check(m.assigned[0].JobID == jobs[0] && m.stats.TotalAssignedJobs == 1 && m.stats.TotalAvailableJobs == 0,
			"assigned %s, statistics %+v", m.assigned[0].JobID, *m.stats)
	})

	r.step(ctx, "acquire-first-acquirer-wins", func(ctx context.Context) error {
		label := unique("shared")
		var sets []*messages
		for range 2 {
			set, err := newScaleSet(ctx, c, "rival", label)
			if err != nil {
				return err
			}
			sc, err := c.MessageSessionClient(ctx, set.ID, "conformance")
			if err != nil {
				return err
			}
			r.secret(sc.Session().MessageQueueAccessToken)
			defer sc.Close(ctx)
			sets = append(sets, &messages{sc: sc, capacity: 5})
		}
		if _, err := s.enqueue(ctx, 1, []string{label}, nil); err != nil {
			return err
		}
		for _, m := range sets {
			if err := m.until(ctx, 10*time.Second, "JobAvailable", func() bool { return len(m.available) >= 1 }); err != nil {
				return err
			}
		}
		id := sets[0].available[0].RunnerRequestID
		won, err := sets[0].sc.AcquireJobs(ctx, []int64{id})
		if err != nil {
			return err
		}
		lost, err := sets[1].sc.AcquireJobs(ctx, []int64{sets[1].available[0].RunnerRequestID})
		if err != nil {
			return err
		}
		return check(slices.Equal(won, []int64{id}) && len(lost) == 0, "first acquirer got %v, second %v", won, lost)
	})

	r.step(ctx, "acquire-session-refresh-after-expired-token", func(ctx context.Context) error {
		set, m, err := listening(ctx, r, c, "acquire-refresh")
		if err != nil {
			return err
		}
		defer m.sc.Close(ctx)
		if _, err := s.enqueue(ctx, 1, []string{set.Name}, nil); err != nil {
			return err
		}
		if err := m.until(ctx, 10*time.Second, "JobAvailable", func() bool { return len(m.available) >= 1 }); err != nil {
			return err
		}
		if err := s.fault(ctx, "expire-mq-token", map[string]any{"times": 1}); err != nil {
			return err
		}
		defer s.clearFaults(ctx)
		got, err := m.sc.AcquireJobs(ctx, requestIDs(m.available))
		r.secret(m.sc.Session().MessageQueueAccessToken)
		return check(err == nil && len(got) == 1, "acquire after an expired token: %v, %v", got, err)
	})

	r.step(ctx, "acquire-capacity-leftovers-offered-again", func(ctx context.Context) error {
		// Upstream's listener acquires every job a message offers and never asks again for the
		// ones the service left out: the service must offer those again once there is room.
		set, m, err := listening(ctx, r, c, "acquire-capacity")
		if err != nil {
			return err
		}
		defer m.sc.Close(ctx)
		m.capacity = 1
		if _, err := m.poll(ctx); err != nil {
			return err
		}
		jobs, err := s.enqueue(ctx, 3, []string{set.Name}, nil)
		if err != nil {
			return err
		}
		if err := m.until(ctx, 10*time.Second, "3 JobAvailable", func() bool { return len(m.available) >= 3 }); err != nil {
			return err
		}
		done := map[string]bool{}
		for round := range 3 {
			offered := m.available
			m.available = nil
			got, err := m.sc.AcquireJobs(ctx, requestIDs(offered))
			if err != nil {
				return err
			}
			if len(got) != 1 {
				return fmt.Errorf("round %d: acquired %v of %v with capacity 1, want exactly one", round, got, requestIDs(offered))
			}
			var jobID string
			for _, o := range offered {
				if o.RunnerRequestID == got[0] {
					jobID = o.JobID
				}
			}
			if err := s.ctl(ctx, "POST", "/jobs/"+jobID+"/complete", map[string]any{}, nil); err != nil {
				return err
			}
			done[jobID] = true
			if round < 2 {
				if err := m.until(ctx, 10*time.Second, fmt.Sprintf("round %d: a new JobAvailable for the jobs left out", round), func() bool {
					return len(m.available) >= 1
				}); err != nil {
					return err
				}
			}
		}
		for _, id := range jobs {
			if !done[id] {
				return fmt.Errorf("job %s never ran", id)
			}
		}
		return nil
	})
}
