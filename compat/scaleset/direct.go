package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/actions/scaleset"
)

func assignedIDs(msgs []*scaleset.JobAssigned) []string {
	ids := make([]string, 0, len(msgs))
	for _, m := range msgs {
		ids = append(ids, m.JobID)
	}
	return ids
}

// directSteps: github.com's mode, the service assigns jobs to a scale set (JobAssigned).
func directSteps(ctx context.Context, r *run, s *sim) {
	c, err := s.patClient(s.orgURL())
	if err != nil {
		r.fail("direct-client", err)
		return
	}

	r.step(ctx, "direct-job-assigned", func(ctx context.Context) error {
		set, m, err := listening(ctx, r, c, "direct")
		if err != nil {
			return err
		}
		defer m.sc.Close(ctx)
		jobs, err := s.enqueue(ctx, 2, []string{set.Name}, nil)
		if err != nil {
			return err
		}
		if err := m.until(ctx, 10*time.Second, "2 JobAssigned", func() bool { return len(m.assigned) >= 2 }); err != nil {
			return err
		}
		got := assignedIDs(m.assigned)
		slices.Sort(got)
		slices.Sort(jobs)
		first := m.assigned[0]
		return check(slices.Equal(got, jobs) && first.RunnerRequestID > 0 && first.RepositoryName != "" &&
			first.OwnerName != "" && first.JobWorkflowRef != "" && slices.Equal(first.RequestLabels, []string{set.Name}) &&
			!first.QueueTime.IsZero() && m.stats != nil && m.stats.TotalAssignedJobs == 2,
			"assigned %v (want %v), first %+v, statistics %+v", got, jobs, *first, m.stats)
	})

	r.step(ctx, "redelivery-until-acknowledged", func(ctx context.Context) error {
		set, m, err := listening(ctx, r, c, "redelivery")
		if err != nil {
			return err
		}
		defer m.sc.Close(ctx)
		if _, err := s.enqueue(ctx, 1, []string{set.Name}, nil); err != nil {
			return err
		}
		first, err := m.sc.GetMessage(ctx, 0, 10)
		if err != nil || first == nil {
			return fmt.Errorf("first poll: %+v, %v", first, err)
		}
		again, err := m.sc.GetMessage(ctx, 0, 10)
		if err != nil || again == nil || again.MessageID != first.MessageID {
			return fmt.Errorf("unacknowledged message %d not delivered again: %+v, %v", first.MessageID, again, err)
		}
		if err := m.sc.DeleteMessage(ctx, first.MessageID); err != nil {
			return err
		}
		after, err := m.sc.GetMessage(ctx, first.MessageID, 10)
		return check(err == nil && after == nil, "after DeleteMessage: %+v, %v; want an empty poll", after, err)
	})

	r.step(ctx, "ack-by-last-message-id", func(ctx context.Context) error {
		set, m, err := listening(ctx, r, c, "lastid")
		if err != nil {
			return err
		}
		defer m.sc.Close(ctx)
		if _, err := s.enqueue(ctx, 1, []string{set.Name}, nil); err != nil {
			return err
		}
		first, err := m.sc.GetMessage(ctx, 0, 10)
		if err != nil || first == nil {
			return fmt.Errorf("first poll: %+v, %v", first, err)
		}
		after, err := m.sc.GetMessage(ctx, first.MessageID, 10)
		return check(err == nil && after == nil, "lastMessageId=%d did not acknowledge it: %+v, %v", first.MessageID, after, err)
	})

	r.step(ctx, "direct-capacity-limits-assignment", func(ctx context.Context) error {
		set, m, err := listening(ctx, r, c, "capacity")
		if err != nil {
			return err
		}
		defer m.sc.Close(ctx)
		m.capacity = 1
		if _, err := m.poll(ctx); err != nil { // records the capacity
			return err
		}
		jobs, err := s.enqueue(ctx, 3, []string{set.Name}, nil)
		if err != nil {
			return err
		}
		if err := m.until(ctx, 10*time.Second, "a JobAssigned", func() bool { return len(m.assigned) >= 1 }); err != nil {
			return err
		}
		if _, err := m.poll(ctx); err != nil { // one more poll: nothing else may come
			return err
		}
		if err := check(len(m.assigned) == 1 && m.stats.TotalAssignedJobs == 1,
			"with capacity 1: %d JobAssigned, statistics %+v", len(m.assigned), m.stats); err != nil {
			return err
		}
		// Room again: the next job is assigned once the first one ends.
		if err := s.ctl(ctx, "POST", "/jobs/"+m.assigned[0].JobID+"/cancel", nil, nil); err != nil {
			return err
		}
		if err := m.until(ctx, 10*time.Second, "a second JobAssigned", func() bool { return len(m.assigned) >= 2 }); err != nil {
			return err
		}
		return check(slices.Contains(jobs, m.assigned[1].JobID) && m.assigned[1].JobID != m.assigned[0].JobID,
			"second assignment %s", m.assigned[1].JobID)
	})

	r.step(ctx, "job-canceled-before-a-runner", func(ctx context.Context) error {
		set, m, err := listening(ctx, r, c, "cancel")
		if err != nil {
			return err
		}
		defer m.sc.Close(ctx)
		jobs, err := s.enqueue(ctx, 1, []string{set.Name}, nil)
		if err != nil {
			return err
		}
		if err := m.until(ctx, 10*time.Second, "JobAssigned", func() bool { return len(m.assigned) >= 1 }); err != nil {
			return err
		}
		if err := s.ctl(ctx, "POST", "/jobs/"+jobs[0]+"/cancel", nil, nil); err != nil {
			return err
		}
		if err := m.until(ctx, 10*time.Second, "JobCompleted", func() bool { return len(m.completed) >= 1 }); err != nil {
			return err
		}
		done := m.completed[0]
		return check(done.JobID == jobs[0] && done.Result == "canceled" && done.RunnerID == 0 &&
			m.stats.TotalAssignedJobs == 0, "completed %+v, statistics %+v", *done, *m.stats)
	})

	r.step(ctx, "messages-batched-at-most-50", func(ctx context.Context) error {
		set, m, err := listening(ctx, r, c, "batch")
		if err != nil {
			return err
		}
		defer m.sc.Close(ctx)
		m.capacity = 100
		if _, err := s.enqueue(ctx, 60, []string{set.Name}, nil); err != nil {
			return err
		}
		msg, err := m.poll(ctx)
		if err != nil || msg == nil {
			return fmt.Errorf("first poll: %v, %v", msg, err)
		}
		if err := check(len(msg.JobAssignedMessages) == 50, "first message has %d jobs, want 50", len(msg.JobAssignedMessages)); err != nil {
			return err
		}
		return m.until(ctx, 10*time.Second, "the other 10 jobs", func() bool { return len(m.assigned) == 60 })
	})

	r.step(ctx, "job-reassigned-after-assign-timeout", func(ctx context.Context) error {
		set, m, err := listening(ctx, r, c, "reassign")
		if err != nil {
			return err
		}
		defer m.sc.Close(ctx)
		if err := s.settings(ctx, map[string]any{"assign_timeout": 0.5}); err != nil {
			return err
		}
		defer s.settings(ctx, map[string]any{"assign_timeout": nil})
		jobs, err := s.enqueue(ctx, 1, []string{set.Name}, nil)
		if err != nil {
			return err
		}
		if err := m.until(ctx, 10*time.Second, "a reassignment", func() bool { return len(m.assigned) >= 2 }); err != nil {
			return err
		}
		first, second := m.assigned[0], m.assigned[1]
		var canceled *scaleset.JobCompleted
		for _, done := range m.completed {
			if done.RunnerRequestID == first.RunnerRequestID {
				canceled = done
			}
		}
		return check(first.JobID == jobs[0] && second.JobID == jobs[0] && second.RunnerRequestID != first.RunnerRequestID &&
			canceled != nil && canceled.Result == "canceled" && canceled.RunnerID == 0,
			"first %d, second %d (job %s), completion of the first %+v", first.RunnerRequestID, second.RunnerRequestID, second.JobID, canceled)
	})
}
