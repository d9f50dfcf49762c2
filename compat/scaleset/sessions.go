package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/actions/scaleset"
	"github.com/google/uuid"
)

// messages collects what the scale set's queue delivers, acknowledging each message the way
// upstream's listener does (DeleteMessage, then lastMessageId on the next poll).
type messages struct {
	sc       *scaleset.MessageSessionClient
	capacity int
	lastID   int
	ids      []int
	stats    *scaleset.RunnerScaleSetStatistic

	available []*scaleset.JobAvailable
	assigned  []*scaleset.JobAssigned
	started   []*scaleset.JobStarted
	completed []*scaleset.JobCompleted
}

// poll gets one message (nil after an empty long poll) and acknowledges it.
func (m *messages) poll(ctx context.Context) (*scaleset.RunnerScaleSetMessage, error) {
	msg, err := m.sc.GetMessage(ctx, m.lastID, m.capacity)
	if err != nil || msg == nil {
		return nil, err
	}
	m.lastID = msg.MessageID
	m.ids = append(m.ids, msg.MessageID)
	m.stats = msg.Statistics
	m.available = append(m.available, msg.JobAvailableMessages...)
	m.assigned = append(m.assigned, msg.JobAssignedMessages...)
	m.started = append(m.started, msg.JobStartedMessages...)
	m.completed = append(m.completed, msg.JobCompletedMessages...)
	return msg, m.sc.DeleteMessage(ctx, msg.MessageID)
}

// until polls until cond holds on what was collected so far, or within elapses.
func (m *messages) until(ctx context.Context, within time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s within %s (available %d, assigned %d, started %d, completed %d)",
				what, within, len(m.available), len(m.assigned), len(m.started), len(m.completed))
		}
		if _, err := m.poll(ctx); err != nil {
			return err
		}
	}
	return nil
}

// listening creates a scale set whose only label is its name, and a session on it.
func listening(ctx context.Context, r *run, c *scaleset.Client, prefix string) (*scaleset.RunnerScaleSet, *messages, error) {
	set, err := newScaleSet(ctx, c, prefix)
	if err != nil {
		return nil, nil, err
	}
	sc, err := c.MessageSessionClient(ctx, set.ID, "conformance")
	if err != nil {
		return nil, nil, err
	}
	r.secret(sc.Session().MessageQueueAccessToken)
	return set, &messages{sc: sc, capacity: 10}, nil
}

func sessionSteps(ctx context.Context, r *run, s *sim) {
	c, err := s.patClient(s.orgURL())
	if err != nil {
		r.fail("session-client", err)
		return
	}
	set, err := newScaleSet(ctx, c, "sessions")
	if err != nil {
		r.fail("session-scale-set", err)
		return
	}
	var sc *scaleset.MessageSessionClient

	r.step(ctx, "session-create", func(ctx context.Context) error {
		sc, err = c.MessageSessionClient(ctx, set.ID, "conformance-owner")
		if err != nil {
			return err
		}
		session := sc.Session()
		r.secret(session.MessageQueueAccessToken)
		return check(session.SessionID != uuid.Nil && session.OwnerName == "conformance-owner" &&
			strings.Contains(session.MessageQueueURL, fmt.Sprintf("/runnerscalesets/%d/messages", set.ID)) &&
			session.MessageQueueAccessToken != "" && session.Statistics != nil &&
			session.RunnerScaleSet != nil && session.RunnerScaleSet.ID == set.ID,
			"session id %s, owner %q, statistics %v", session.SessionID, session.OwnerName, session.Statistics)
	})
	if sc == nil {
		return
	}

	r.step(ctx, "session-conflict-409-not-retried", func(ctx context.Context) error {
		before, err := s.requests(ctx, "*/sessions", "POST")
		if err != nil {
			return err
		}
		second, err := c.MessageSessionClient(ctx, set.ID, "conformance-other")
		if err == nil {
			second.Close(ctx)
			return fmt.Errorf("a second session was created while one is live")
		}
		if !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "RunnerScaleSetSessionConflictException") {
			return fmt.Errorf("want a 409 RunnerScaleSetSessionConflictException, got %v", err)
		}
		seen, err := s.requestsSince(ctx, "*/sessions", "POST", len(before))
		if err != nil {
			return err
		}
		return check(statuses(seen) == "409", "session creates after the first: %s, want one 409", statuses(seen))
	})

	r.step(ctx, "poll-empty-202", func(ctx context.Context) error {
		start := time.Now()
		msg, err := sc.GetMessage(ctx, 0, 3)
		if err != nil {
			return err
		}
		return check(msg == nil && time.Since(start) >= 500*time.Millisecond,
			"got %+v after %s, want nil after a long poll", msg, time.Since(start))
	})

	r.step(ctx, "poll-max-capacity-header", func(ctx context.Context) error {
		if _, err := sc.GetMessage(ctx, 0, 7); err != nil {
			return err
		}
		snap, err := s.snapScaleSet(ctx, set.ID)
		if err != nil {
			return err
		}
		return check(snap.MaxCapacity != nil && *snap.MaxCapacity == 7, "maxCapacity %v, want 7", snap.MaxCapacity)
	})

	r.step(ctx, "session-refresh-after-expired-token", func(ctx context.Context) error {
		if err := s.fault(ctx, "expire-mq-token", map[string]any{"times": 1}); err != nil {
			return err
		}
		before, err := s.requests(ctx, "*/sessions/*", "PATCH")
		if err != nil {
			return err
		}
		jobs, err := s.enqueue(ctx, 1, []string{set.Name}, nil)
		if err != nil {
			return err
		}
		msg, err := sc.GetMessage(ctx, 0, 7)
		if err != nil {
			return err
		}
		if err := check(msg != nil && len(msg.JobAssignedMessages) == 1 && msg.JobAssignedMessages[0].JobID == jobs[0],
			"after the refresh got %+v, want the JobAssigned of %s", msg, jobs[0]); err != nil {
			return err
		}
		if err := sc.DeleteMessage(ctx, msg.MessageID); err != nil {
			return err
		}
		seen, err := s.requestsSince(ctx, "*/sessions/*", "PATCH", len(before))
		if err != nil {
			return err
		}
		r.secret(sc.Session().MessageQueueAccessToken)
		return check(statuses(seen) == "200", "session refreshes %s, want one 200", statuses(seen))
	})

	r.step(ctx, "session-refresh-failure-surfaces", func(ctx context.Context) error {
		if err := s.fault(ctx, "expire-mq-token", map[string]any{"times": 1}); err != nil {
			return err
		}
		if err := s.fault(ctx, "session-refresh-404", map[string]any{"times": 1}); err != nil {
			return err
		}
		defer s.clearFaults(ctx)
		_, err := sc.GetMessage(ctx, 0, 7)
		return check(err != nil && strings.Contains(err.Error(), "refresh message session") && strings.Contains(err.Error(), "404"),
			"want a failed refresh (404), got %v", err)
	})

	r.step(ctx, "session-idle-expiry-frees-the-scale-set", func(ctx context.Context) error {
		// A listener that died without closing its session: once the session idles out, a
		// new listener gets one, and the dead session's client fails on its next poll. The
		// idle timeout is the simulator's, for every session: it is restored before any other
		// session is used (expiry is checked when a session is touched).
		idle, err := newScaleSet(ctx, c, "idle-session")
		if err != nil {
			return err
		}
		dead, err := c.MessageSessionClient(ctx, idle.ID, "crashed")
		if err != nil {
			return err
		}
		r.secret(dead.Session().MessageQueueAccessToken)
		if err := s.settings(ctx, map[string]any{"session_idle_timeout": 0.3}); err != nil {
			return err
		}
		defer s.settings(ctx, map[string]any{"session_idle_timeout": 32})
		var next *scaleset.MessageSessionClient
		var last error
		if err := waitFor(ctx, 10*time.Second, "the idle session to expire", func() (bool, error) {
			next, last = c.MessageSessionClient(ctx, idle.ID, "successor")
			return last == nil, nil
		}); err != nil {
			return fmt.Errorf("%w (last error: %v)", err, last)
		}
		r.secret(next.Session().MessageQueueAccessToken)
		defer next.Close(ctx)
		_, err = dead.GetMessage(ctx, 0, 1)
		return check(err != nil, "the expired session still polls")
	})

	r.step(ctx, "session-delete", func(ctx context.Context) error {
		if err := sc.Close(ctx); err != nil {
			return err
		}
		snap, err := s.snapScaleSet(ctx, set.ID)
		if err != nil {
			return err
		}
		if snap.Session != nil {
			return fmt.Errorf("session still live after Close")
		}
		again, err := c.MessageSessionClient(ctx, set.ID, "conformance-owner")
		if err != nil {
			return fmt.Errorf("a new session after Close: %w", err)
		}
		r.secret(again.Session().MessageQueueAccessToken)
		return again.Close(ctx)
	})
}
