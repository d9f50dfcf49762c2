package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/actions/scaleset"
)

// sim is one running simulator: its control API (/_sim, plain JSON over HTTP) and factories
// for upstream clients pointed at it.
type sim struct {
	base string
	org  string
	r    *run
	http *http.Client
	pat  string
}

func newSim(base, org string, r *run) *sim {
	return &sim{base: base, org: org, r: r, http: &http.Client{Timeout: 90 * time.Second}}
}

// ready checks the simulator's mode and seeds the PAT every PAT client uses.
func (s *sim) ready(ctx context.Context, mode string) error {
	var health struct{ Status, Mode string }
	if err := s.ctl(ctx, http.MethodGet, "/health", nil, &health); err != nil {
		return err
	}
	if health.Mode != mode {
		return fmt.Errorf("%s: simulator runs in mode %q, want %q", s.base, health.Mode, mode)
	}
	pat, err := s.newPAT(ctx)
	s.pat = pat
	return err
}

// ctl calls the simulator's control API; a status >= 300 is an error carrying the status.
func (s *sim) ctl(ctx context.Context, method, route string, body, out any) error {
	var reader io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+"/_sim"+route, reader)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("control %s %s: %w", method, route, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return &ctlError{status: resp.StatusCode, text: fmt.Sprintf("control %s %s: %d %s", method, route, resp.StatusCode, bytes.TrimSpace(data))}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

type ctlError struct {
	status int
	text   string
}

func (e *ctlError) Error() string { return e.text }

func (s *sim) newPAT(ctx context.Context) (string, error) {
	var out struct{ Token string }
	if err := s.ctl(ctx, http.MethodPost, "/pats", map[string]any{}, &out); err != nil {
		return "", err
	}
	s.r.secret(out.Token)
	return out.Token, nil
}

type appCredentials struct {
	AppID          int64  `json:"app_id"`
	ClientID       string `json:"client_id"`
	InstallationID int64  `json:"installation_id"`
	PrivateKey     string `json:"private_key"`
}

func (s *sim) newApp(ctx context.Context) (appCredentials, error) {
	var app appCredentials
	if err := s.ctl(ctx, http.MethodPost, "/apps", map[string]any{}, &app); err != nil {
		return app, err
	}
	s.r.secret(app.PrivateKey)
	return app, nil
}

// Config URLs, GHES-style: the client derives the REST base <base>/api/v3 from them.
func (s *sim) orgURL() string                { return s.base + "/" + s.org }
func (s *sim) repoURL(repo string) string    { return s.base + "/" + s.org + "/" + repo }
func (s *sim) enterpriseURL(e string) string { return s.base + "/enterprises/" + e }

// fast retries: the library's attempt count (4 retries), short waits.
var fastRetries = []scaleset.HTTPOption{scaleset.WithRetryWaitMax(100 * time.Millisecond)}

func systemInfo(sub string) scaleset.SystemInfo {
	return scaleset.SystemInfo{System: "arcflow-conformance", Version: "0", CommitSHA: "none", Subsystem: sub}
}

func (s *sim) patClient(configURL string, options ...scaleset.HTTPOption) (*scaleset.Client, error) {
	return scaleset.NewClientWithPersonalAccessToken(scaleset.NewClientWithPersonalAccessTokenConfig{
		GitHubConfigURL:     configURL,
		PersonalAccessToken: s.pat,
		SystemInfo:          systemInfo("conformance"),
	}, append(append([]scaleset.HTTPOption{}, fastRetries...), options...)...)
}

func (s *sim) appClient(configURL, clientID string, app appCredentials) (*scaleset.Client, error) {
	return scaleset.NewClientWithGitHubApp(scaleset.ClientWithGitHubAppConfig{
		GitHubConfigURL: configURL,
		GitHubAppAuth: scaleset.GitHubAppAuth{
			ClientID:       clientID,
			InstallationID: app.InstallationID,
			PrivateKey:     app.PrivateKey,
		},
		SystemInfo: systemInfo("conformance"),
	}, fastRetries...)
}

type simJob struct {
	JobID           string  `json:"jobId"`
	RunnerRequestID int64   `json:"runnerRequestId"`
	State           string  `json:"state"`
	Attempt         int     `json:"attempt"`
	ScaleSetID      *int    `json:"scaleSetId"`
	RunnerID        *int    `json:"runnerId"`
	Result          *string `json:"result"`
}

// enqueue queues count jobs with these labels; extra adds fields such as duration.
func (s *sim) enqueue(ctx context.Context, count int, labels []string, extra map[string]any) ([]string, error) {
	body := map[string]any{"labels": labels, "count": count}
	for k, v := range extra {
		body[k] = v
	}
	var out struct {
		JobIDs []string `json:"job_ids"`
	}
	err := s.ctl(ctx, http.MethodPost, "/jobs", body, &out)
	return out.JobIDs, err
}

func (s *sim) job(ctx context.Context, id string) (simJob, error) {
	var job simJob
	err := s.ctl(ctx, http.MethodGet, "/jobs/"+url.PathEscape(id), nil, &job)
	return job, err
}

func (s *sim) waitJobState(ctx context.Context, id, state string, within time.Duration) error {
	return waitFor(ctx, within, "job "+id+" "+state, func() (bool, error) {
		job, err := s.job(ctx, id)
		return err == nil && job.State == state, err
	})
}

type connection struct {
	RunnerID   int     `json:"runner_id"`
	RunnerName string  `json:"runner_name"`
	ScaleSetID int     `json:"scale_set_id"`
	JobID      *string `json:"job_id"`
}

// connectRunner brings a runner online with its JIT config, as the runner binary would.
func (s *sim) connectRunner(ctx context.Context, jit string) (connection, error) {
	var c connection
	err := s.ctl(ctx, http.MethodPost, "/runners/connect", map[string]any{"jit_config": jit}, &c)
	return c, err
}

// runRunner connects a runner, waits up to jobWait for a job, runs it for duration, completes it.
func (s *sim) runRunner(ctx context.Context, jit string, duration, jobWait float64) error {
	return s.ctl(ctx, http.MethodPost, "/runners/run",
		map[string]any{"jit_config": jit, "job_duration": duration, "job_wait": jobWait}, nil)
}

func (s *sim) fault(ctx context.Context, kind string, body map[string]any) error {
	return s.ctl(ctx, http.MethodPost, "/faults/"+kind, body, nil)
}

func (s *sim) clearFaults(ctx context.Context) error {
	return s.ctl(ctx, http.MethodDelete, "/faults", nil, nil)
}

func (s *sim) settings(ctx context.Context, body map[string]any) error {
	return s.ctl(ctx, http.MethodPatch, "/settings", body, nil)
}

type request struct {
	Method string
	Path   string
	Status int
}

// requests lists the requests the simulator saw whose path matches the glob route.
func (s *sim) requests(ctx context.Context, route, method string) ([]request, error) {
	q := url.Values{"route": {route}}
	if method != "" {
		q.Set("method", method)
	}
	var out struct{ Requests []request }
	err := s.ctl(ctx, http.MethodGet, "/requests?"+q.Encode(), nil, &out)
	return out.Requests, err
}

// requestsSince returns the requests matching route after the first skip of them.
func (s *sim) requestsSince(ctx context.Context, route, method string, skip int) ([]request, error) {
	all, err := s.requests(ctx, route, method)
	if err != nil {
		return nil, err
	}
	if skip > len(all) {
		skip = len(all)
	}
	return all[skip:], nil
}

type snapScaleSet struct {
	ID          int  `json:"id"`
	MaxCapacity *int `json:"maxCapacity"`
	Session     *struct {
		SessionID string `json:"sessionId"`
	} `json:"session"`
}

func (s *sim) snapScaleSet(ctx context.Context, id int) (snapScaleSet, error) {
	var snap struct {
		ScaleSets []snapScaleSet `json:"scaleSets"`
	}
	if err := s.ctl(ctx, http.MethodGet, "/snapshot", nil, &snap); err != nil {
		return snapScaleSet{}, err
	}
	for _, set := range snap.ScaleSets {
		if set.ID == id {
			return set, nil
		}
	}
	return snapScaleSet{}, fmt.Errorf("scale set %d not in the snapshot", id)
}

// unique gives names that never repeat within one run.
var counter atomic.Int64

func unique(prefix string) string {
	return prefix + "-" + strconv.FormatInt(counter.Add(1), 10)
}
