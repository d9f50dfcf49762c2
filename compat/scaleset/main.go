// Command scaleset-conformance drives arcflow's Actions service simulator through the flows
// ARC uses, with the public API of upstream's own client library (github.com/actions/scaleset)
// and nothing else. It prints one line per step, "PASS name" or "FAIL name: why", then
// "N passed, N failed", and exits 1 when any step failed.
//
//	scaleset-conformance -direct http://127.0.0.1:PORT -acquire http://127.0.0.1:PORT2
//
// Both simulators must be started with `arcflow sim actions` (one in --mode direct, one in
// --mode acquire) and only this program may use them: steps count requests and jobs.
// scripts/peers.sh starts them, runs this program and stops them.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

func main() {
	direct := flag.String("direct", "", "base URL of a simulator in direct mode")
	acquire := flag.String("acquire", "", "base URL of a simulator in acquire mode")
	org := flag.String("org", "example-org", "organization of the config URLs")
	only := flag.String("only", "", "run only the steps whose name contains this text")
	flag.Parse()
	if *direct == "" || *acquire == "" {
		fmt.Fprintln(os.Stderr, "usage: scaleset-conformance -direct URL -acquire URL")
		os.Exit(2)
	}
	r := &run{only: *only}
	d := newSim(strings.TrimRight(*direct, "/"), *org, r)
	a := newSim(strings.TrimRight(*acquire, "/"), *org, r)
	ctx := context.Background()
	if err := d.ready(ctx, "direct"); err != nil {
		r.fail("simulator-direct-ready", err)
	} else if err := a.ready(ctx, "acquire"); err != nil {
		r.fail("simulator-acquire-ready", err)
	} else {
		authSteps(ctx, r, d)
		scaleSetSteps(ctx, r, d)
		sessionSteps(ctx, r, d)
		directSteps(ctx, r, d)
		runnerSteps(ctx, r, d)
		retrySteps(ctx, r, d)
		acquireSteps(ctx, r, a)
		listenerSteps(ctx, r, d, a)
	}
	fmt.Printf("%d passed, %d failed\n", r.passed, r.failed)
	if r.failed > 0 {
		os.Exit(1)
	}
}

// run counts the steps and keeps every secret the program handles, so that no failure message
// can print one.
type run struct {
	mu      sync.Mutex
	only    string
	passed  int
	failed  int
	secrets []string
}

// stepTimeout bounds one step; every wait inside a step has a shorter deadline of its own.
const stepTimeout = 60 * time.Second

// step runs fn as the named step and prints its outcome.
func (r *run) step(ctx context.Context, name string, fn func(ctx context.Context) error) {
	if r.only != "" && !strings.Contains(name, r.only) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	err := fn(ctx)
	if err != nil {
		r.fail(name, err)
		return
	}
	r.mu.Lock()
	r.passed++
	r.mu.Unlock()
	fmt.Printf("PASS %s\n", name)
}

func (r *run) fail(name string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed++
	fmt.Printf("FAIL %s: %s\n", name, r.redactLocked(err.Error()))
}

// secret records a value that must never be printed.
func (r *run) secret(value string) {
	if len(value) < 8 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets = append(r.secrets, value)
}

func (r *run) redactLocked(text string) string {
	for _, s := range r.secrets {
		text = strings.ReplaceAll(text, s, "[redacted]")
	}
	return strings.ReplaceAll(text, "\n", " ")
}

// check turns a false condition into an error.
func check(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}

// waitFor polls cond until it holds or within elapses.
func waitFor(ctx context.Context, within time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(within)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", within, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
