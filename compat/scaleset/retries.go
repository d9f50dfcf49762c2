package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/actions/scaleset"
)

// retrySteps: the library's retry policy (5xx and 429, with Retry-After) against the
// simulator's fault injection.
func retrySteps(ctx context.Context, r *run, s *sim) {
	c, err := s.patClient(s.orgURL())
	if err != nil {
		r.fail("retry-client", err)
		return
	}
	set, err := newScaleSet(ctx, c, "retries")
	if err != nil {
		r.fail("retry-scale-set", err)
		return
	}
	route := fmt.Sprintf("*/_apis/runtime/runnerscalesets/%d", set.ID)

	// faulted injects a fault on GET <scale set>, runs call and returns the statuses seen.
	faulted := func(ctx context.Context, fault map[string]any, call func() error) (string, error, error) {
		fault["route"], fault["method"] = route, "GET"
		before, err := s.requests(ctx, route, "GET")
		if err != nil {
			return "", nil, err
		}
		if err := s.fault(ctx, "status", fault); err != nil {
			return "", nil, err
		}
		defer s.clearFaults(ctx)
		callErr := call()
		seen, err := s.requestsSince(ctx, route, "GET", len(before))
		return statuses(seen), callErr, err
	}
	get := func() error { _, err := c.GetRunnerScaleSetByID(ctx, set.ID); return err }

	for _, status := range []int{500, 502, 503, 504} {
		r.step(ctx, fmt.Sprintf("retry-%d", status), func(ctx context.Context) error {
			seen, callErr, err := faulted(ctx, map[string]any{"status": status, "times": 2}, get)
			if err != nil {
				return err
			}
			want := fmt.Sprintf("%d,%d,200", status, status)
			return check(callErr == nil && seen == want, "statuses %s (want %s), error %v", seen, want, callErr)
		})
	}

	r.step(ctx, "retry-429-retry-after", func(ctx context.Context) error {
		start := time.Now()
		seen, callErr, err := faulted(ctx, map[string]any{"status": 429, "times": 1, "retry_after": "1"}, get)
		if err != nil {
			return err
		}
		took := time.Since(start)
		return check(callErr == nil && seen == "429,200" && took >= 900*time.Millisecond,
			"statuses %s (want 429,200), took %s (Retry-After 1 s), error %v", seen, took, callErr)
	})

	r.step(ctx, "retry-gives-up", func(ctx context.Context) error {
		few, err := s.patClient(s.orgURL(), scaleset.WithRetryMax(2))
		if err != nil {
			return err
		}
		seen, callErr, err := faulted(ctx, map[string]any{"status": 500, "times": 10}, func() error {
			_, err := few.GetRunnerScaleSetByID(ctx, set.ID)
			return err
		})
		if err != nil {
			return err
		}
		return check(callErr != nil && seen == "500,500,500", "statuses %s (want 3 × 500), error %v", seen, callErr)
	})

	r.step(ctx, "no-retry-on-400", func(ctx context.Context) error {
		seen, callErr, err := faulted(ctx, map[string]any{"status": 400, "times": 2, "type_name": "System.ArgumentException, mscorlib"}, get)
		if err != nil {
			return err
		}
		return check(callErr != nil && seen == "400" && strings.Contains(callErr.Error(), "ArgumentException"),
			"statuses %s (want one 400), error %v", seen, callErr)
	})

	r.step(ctx, "retry-5xx-on-message-poll", func(ctx context.Context) error {
		_, m, err := listening(ctx, r, c, "poll-retry")
		if err != nil {
			return err
		}
		defer m.sc.Close(ctx)
		if err := s.fault(ctx, "status", map[string]any{"route": "*/messages", "method": "GET", "status": 503, "times": 1}); err != nil {
			return err
		}
		defer s.clearFaults(ctx)
		msg, err := m.sc.GetMessage(ctx, 0, 1)
		return check(err == nil && msg == nil, "poll after a 503: %+v, %v; want an empty poll", msg, err)
	})

	r.step(ctx, "admin-token-refreshed-near-expiry", func(ctx context.Context) error {
		// The library renews the admin token when it expires within 60 s.
		if err := s.fault(ctx, "admin-token-ttl", map[string]any{"seconds": 30}); err != nil {
			return err
		}
		defer s.settings(ctx, map[string]any{"admin_token_ttl": 3600})
		fresh, err := s.patClient(s.orgURL())
		if err != nil {
			return err
		}
		before, err := s.requests(ctx, "*/actions/runner-registration", "POST")
		if err != nil {
			return err
		}
		for range 3 {
			if _, err := fresh.GetRunnerScaleSetByID(ctx, set.ID); err != nil {
				return err
			}
		}
		seen, err := s.requestsSince(ctx, "*/actions/runner-registration", "POST", len(before))
		if err != nil {
			return err
		}
		return check(len(seen) == 3, "%d admin connections for 3 calls with a 30 s token, want 3", len(seen))
	})

	r.step(ctx, "utf8-bom-trimmed", func(ctx context.Context) error {
		if err := s.fault(ctx, "bom", map[string]any{"enabled": true}); err != nil {
			return err
		}
		defer s.clearFaults(ctx)
		got, err := c.GetRunnerScaleSetByID(ctx, set.ID)
		if err != nil {
			return err
		}
		return check(got.ID == set.ID, "got %+v", *got)
	})

	r.step(ctx, "text-plain-error-body", func(ctx context.Context) error {
		if err := s.fault(ctx, "text-plain", map[string]any{"route": route, "method": "GET", "times": 1}); err != nil {
			return err
		}
		defer s.clearFaults(ctx)
		_, err := c.GetRunnerScaleSetByID(ctx, set.ID)
		return check(err != nil && strings.Contains(err.Error(), "400") && !strings.Contains(err.Error(), "failed to unmarshal"),
			"want the plain-text 400 as is, got %v", err)
	})

	r.step(ctx, "error-carries-activity-id", func(ctx context.Context) error {
		_, err := c.GetRunnerScaleSetByID(ctx, 999999)
		return check(err != nil && strings.Contains(err.Error(), "activity_id=") && strings.Contains(err.Error(), "github_request_id="),
			"want activity_id and github_request_id in %v", err)
	})
}
