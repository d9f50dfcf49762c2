package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/actions/scaleset"
)

// defaultGroup resolves the default runner group, which needs the whole token chain:
// registration token (REST), admin connection (runner-registration), admin JWT (service).
func defaultGroup(ctx context.Context, c *scaleset.Client) error {
	group, err := c.GetRunnerGroupByName(ctx, scaleset.DefaultRunnerGroup)
	if err != nil {
		return err
	}
	return check(group.ID == 1 && group.IsDefault, "default group = %+v, want id 1, default", *group)
}

func authSteps(ctx context.Context, r *run, s *sim) {
	for _, scope := range []struct{ name, url string }{
		{"org", s.orgURL()},
		{"repo", s.repoURL("repo")},
		{"enterprise", s.enterpriseURL("example-enterprise")},
	} {
		r.step(ctx, "auth-pat-"+scope.name, func(ctx context.Context) error {
			c, err := s.patClient(scope.url)
			if err != nil {
				return err
			}
			return defaultGroup(ctx, c)
		})
	}

	r.step(ctx, "auth-pat-unknown-refused", func(ctx context.Context) error {
		c, err := scaleset.NewClientWithPersonalAccessToken(scaleset.NewClientWithPersonalAccessTokenConfig{
			GitHubConfigURL:     s.orgURL(),
			PersonalAccessToken: "ghp_not_known_to_the_simulator",
			SystemInfo:          systemInfo("conformance"),
		}, fastRetries...)
		if err != nil {
			return err
		}
		_, err = c.GetRunnerGroupByName(ctx, scaleset.DefaultRunnerGroup)
		return check(err != nil && strings.Contains(err.Error(), "401"), "want a 401 error, got %v", err)
	})

	app, err := s.newApp(ctx)
	if err != nil {
		r.fail("auth-app-credentials", err)
		return
	}
	for _, scope := range []struct{ name, url, clientID string }{
		{"org-client-id", s.orgURL(), app.ClientID},
		{"org-app-id", s.orgURL(), strconv.FormatInt(app.AppID, 10)},
		{"repo", s.repoURL("repo"), app.ClientID},
	} {
		r.step(ctx, "auth-app-"+scope.name, func(ctx context.Context) error {
			c, err := s.appClient(scope.url, scope.clientID, app)
			if err != nil {
				return err
			}
			return defaultGroup(ctx, c)
		})
	}
	r.step(ctx, "auth-app-enterprise-refused", func(ctx context.Context) error {
		// An installation token cannot get an enterprise registration token (403, as on GitHub).
		c, err := s.appClient(s.enterpriseURL("example-enterprise"), app.ClientID, app)
		if err != nil {
			return err
		}
		_, err = c.GetRunnerGroupByName(ctx, scaleset.DefaultRunnerGroup)
		return check(err != nil && strings.Contains(err.Error(), "403"), "want a 403 error, got %v", err)
	})

	r.step(ctx, "auth-runner-registration-retried-on-401", func(ctx context.Context) error {
		// The library retries runner-registration on 401/403 (a fresh registration token can
		// take a moment to be accepted).
		if err := s.fault(ctx, "runner-registration", map[string]any{"status": 401, "times": 2}); err != nil {
			return err
		}
		defer s.clearFaults(ctx)
		before, err := s.requests(ctx, "*/actions/runner-registration", "POST")
		if err != nil {
			return err
		}
		c, err := s.patClient(s.orgURL())
		if err != nil {
			return err
		}
		if err := defaultGroup(ctx, c); err != nil {
			return err
		}
		seen, err := s.requestsSince(ctx, "*/actions/runner-registration", "POST", len(before))
		if err != nil {
			return err
		}
		return check(statuses(seen) == "401,401,201", "runner-registration statuses %s, want 401,401,201", statuses(seen))
	})

	r.step(ctx, "runner-group-by-name", func(ctx context.Context) error {
		name := unique("gpu-pool")
		var created scaleset.RunnerGroup
		if err := s.ctl(ctx, "POST", "/runner-groups", map[string]any{"name": name}, &created); err != nil {
			return err
		}
		c, err := s.patClient(s.orgURL())
		if err != nil {
			return err
		}
		group, err := c.GetRunnerGroupByName(ctx, name)
		if err != nil {
			return err
		}
		return check(group.ID == created.ID && group.ID != 1 && group.Name == name && !group.IsDefault,
			"group %+v, want id %d named %s", *group, created.ID, name)
	})

	r.step(ctx, "runner-group-missing", func(ctx context.Context) error {
		c, err := s.patClient(s.orgURL())
		if err != nil {
			return err
		}
		_, err = c.GetRunnerGroupByName(ctx, "no-such-group")
		return check(err != nil && strings.Contains(err.Error(), "no runner group found"), "want 'no runner group found', got %v", err)
	})
}

func statuses(reqs []request) string {
	parts := make([]string, 0, len(reqs))
	for _, q := range reqs {
		parts = append(parts, strconv.Itoa(q.Status))
	}
	return strings.Join(parts, ",")
}

// wantErr checks that err wraps target.
func wantErr(err, target error) error {
	if errors.Is(err, target) {
		return nil
	}
	return fmt.Errorf("want an error wrapping %q, got %v", target, err)
}
