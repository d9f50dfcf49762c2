package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/actions/scaleset"
)

func labelNames(labels []scaleset.Label) []string {
	names := make([]string, 0, len(labels))
	for _, l := range labels {
		names = append(names, l.Name)
	}
	return names
}

// newScaleSet creates a scale set in the default group with a unique name and these labels
// (its name alone when none).
func newScaleSet(ctx context.Context, c *scaleset.Client, prefix string, labels ...string) (*scaleset.RunnerScaleSet, error) {
	set := &scaleset.RunnerScaleSet{Name: unique(prefix), RunnerGroupID: 1}
	for _, l := range labels {
		set.Labels = append(set.Labels, scaleset.Label{Name: l})
	}
	return c.CreateRunnerScaleSet(ctx, set)
}

func scaleSetSteps(ctx context.Context, r *run, s *sim) {
	c, err := s.patClient(s.orgURL())
	if err != nil {
		r.fail("scale-set-client", err)
		return
	}
	var created *scaleset.RunnerScaleSet

	r.step(ctx, "scale-set-create", func(ctx context.Context) error {
		created, err = newScaleSet(ctx, c, "linux", "linux", "x64")
		if err != nil {
			return err
		}
		return check(created.ID > 0 && created.RunnerGroupID == 1 &&
			slices.Equal(labelNames(created.Labels), []string{"linux", "x64"}) &&
			created.Statistics != nil && !created.CreatedOn.IsZero(),
			"created %+v", *created)
	})
	if created == nil {
		return
	}

	r.step(ctx, "scale-set-create-name-as-label", func(ctx context.Context) error {
		set, err := newScaleSet(ctx, c, "bare")
		if err != nil {
			return err
		}
		return check(slices.Equal(labelNames(set.Labels), []string{set.Name}), "labels %v, want [%s]", labelNames(set.Labels), set.Name)
	})

	r.step(ctx, "scale-set-create-duplicate-refused", func(ctx context.Context) error {
		_, err := c.CreateRunnerScaleSet(ctx, &scaleset.RunnerScaleSet{Name: created.Name, RunnerGroupID: 1})
		return check(err != nil && strings.Contains(err.Error(), "RunnerScaleSetExistsException"),
			"want RunnerScaleSetExistsException, got %v", err)
	})

	r.step(ctx, "scale-set-get-by-name", func(ctx context.Context) error {
		got, err := c.GetRunnerScaleSet(ctx, 1, created.Name)
		if err != nil {
			return err
		}
		if err := check(got != nil && got.ID == created.ID, "got %+v, want id %d", got, created.ID); err != nil {
			return err
		}
		missing, err := c.GetRunnerScaleSet(ctx, 1, "no-such-scale-set")
		return check(err == nil && missing == nil, "unknown name: got %+v, %v; want nil, nil", missing, err)
	})

	r.step(ctx, "scale-set-get-by-id", func(ctx context.Context) error {
		got, err := c.GetRunnerScaleSetByID(ctx, created.ID)
		if err != nil {
			return err
		}
		return check(got.Name == created.Name && got.RunnerGroupName != "", "got %+v", *got)
	})

	r.step(ctx, "scale-set-update", func(ctx context.Context) error {
		// ARC sends partial objects: the new labels and settings only.
		_, err := c.UpdateRunnerScaleSet(ctx, created.ID, &scaleset.RunnerScaleSet{
			Labels:        []scaleset.Label{{Name: "linux"}, {Name: "arm64"}},
			RunnerSetting: scaleset.RunnerSetting{DisableUpdate: true},
		})
		if err != nil {
			return err
		}
		got, err := c.GetRunnerScaleSetByID(ctx, created.ID)
		if err != nil {
			return err
		}
		return check(got.Name == created.Name && got.RunnerSetting.DisableUpdate &&
			slices.Equal(labelNames(got.Labels), []string{"linux", "arm64"}), "after update %+v", *got)
	})

	r.step(ctx, "scale-set-delete", func(ctx context.Context) error {
		if err := c.DeleteRunnerScaleSet(ctx, created.ID); err != nil {
			return err
		}
		byName, err := c.GetRunnerScaleSet(ctx, 1, created.Name)
		if err != nil || byName != nil {
			return check(false, "by name after delete: %+v, %v; want nil, nil", byName, err)
		}
		_, err = c.GetRunnerScaleSetByID(ctx, created.ID)
		return check(err != nil && strings.Contains(err.Error(), "404"), "by id after delete: want a 404 error, got %v", err)
	})

	r.step(ctx, "scale-set-in-custom-group", func(ctx context.Context) error {
		name := unique("custom-group")
		var group scaleset.RunnerGroup
		if err := s.ctl(ctx, "POST", "/runner-groups", map[string]any{"name": name}, &group); err != nil {
			return err
		}
		found, err := c.GetRunnerGroupByName(ctx, name)
		if err != nil {
			return err
		}
		set, err := c.CreateRunnerScaleSet(ctx, &scaleset.RunnerScaleSet{Name: unique("grouped"), RunnerGroupID: found.ID})
		if err != nil {
			return err
		}
		inGroup, err := c.GetRunnerScaleSet(ctx, found.ID, set.Name)
		if err != nil {
			return err
		}
		inDefault, err := c.GetRunnerScaleSet(ctx, 1, set.Name)
		if err != nil {
			return err
		}
		return check(set.RunnerGroupID == found.ID && set.RunnerGroupName == name &&
			inGroup != nil && inGroup.ID == set.ID && inDefault == nil,
			"set %+v; in its group %+v; in the default group %+v", *set, inGroup, inDefault)
	})

	r.step(ctx, "scale-set-get-by-name-ambiguous", func(ctx context.Context) error {
		// One name in two groups, looked up without a group (runnerGroupId=0): the simulator
		// answers both, and the library turns a count above 1 into an error that carries the
		// HTTP status and the response's activity id.
		name := unique("twice")
		var group scaleset.RunnerGroup
		if err := s.ctl(ctx, "POST", "/runner-groups", map[string]any{"name": unique("second-group")}, &group); err != nil {
			return err
		}
		for _, id := range []int{1, group.ID} {
			if _, err := c.CreateRunnerScaleSet(ctx, &scaleset.RunnerScaleSet{Name: name, RunnerGroupID: id}); err != nil {
				return err
			}
		}
		got, err := c.GetRunnerScaleSet(ctx, 0, name)
		if err == nil {
			return fmt.Errorf("want an error for two scale sets named %s, got %+v", name, got)
		}
		text := err.Error()
		return check(strings.Contains(text, "multiple runner scale sets found") && strings.Contains(text, `status="200 OK"`) &&
			strings.Contains(text, "activity_id=") && strings.Contains(text, "github_request_id="),
			"error without status or activity id: %v", err)
	})
}
