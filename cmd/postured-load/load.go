package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// clients are keep-alive HTTP/1.1 connections to one target, each with an
// API session of its own (the null server ignores the token).
type clients struct {
	t      target
	hcs    []*http.Client
	tokens []string
	// body is the JSON body of client i's k-th posture response.
	body func(i, k int) []byte
}

func newClients(t target, tokens []string, body func(i, k int) []byte) *clients {
	c := &clients{t: t, tokens: tokens, body: body}
	for range tokens {
		c.hcs = append(c.hcs, t.newClient())
	}
	return c
}

// post sends client i's k-th posture response and fails unless it is
// answered 201.
func (c *clients) post(ctx context.Context, i, k int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.t.base+clientAPI+"/posture-response", bytes.NewReader(c.body(i, k)))
	if err != nil {
		return err
	}
	req.Header.Set(headerSession, c.tokens[i])
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hcs[i].Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("%s: status %d: %s", c.t.name, resp.StatusCode, b)
	}
	return nil
}

// warm opens every client's connection (TLS handshake included) outside
// the measurement.
func (c *clients) warm(ctx context.Context) error {
	var g sync.WaitGroup
	errs := make([]error, len(c.hcs))
	for i := range c.hcs {
		g.Go(func() { errs[i] = c.post(ctx, i, 0) })
	}
	g.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// burst posts as fast as the target answers, every client one request at
// a time, for d, and returns the answered requests per second.
func (c *clients) burst(ctx context.Context, d time.Duration) (float64, error) {
	if err := c.warm(ctx); err != nil {
		return 0, err
	}
	var done atomic.Int64
	var g sync.WaitGroup
	var firstErr atomic.Pointer[error]
	start := time.Now()
	deadline := start.Add(d)
	for i := range c.hcs {
		g.Go(func() {
			for k := 1; time.Now().Before(deadline); k++ {
				if err := c.post(ctx, i, k); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				done.Add(1)
			}
		})
	}
	g.Wait()
	if p := firstErr.Load(); p != nil {
		return 0, *p
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}

// paced posts rate requests per second in all, spread over the clients
// (each on its own schedule, not catching up on missed slots), until ctx
// ends; it returns the rate achieved.
func (c *clients) paced(ctx context.Context, rate float64) (float64, error) {
	interval := time.Duration(float64(len(c.hcs)) / rate * float64(time.Second))
	var done atomic.Int64
	var g sync.WaitGroup
	var firstErr atomic.Pointer[error]
	start := time.Now()
	for i := range c.hcs {
		g.Go(func() {
			// Staggered so that the clients do not post in lockstep.
			next := start.Add(interval * time.Duration(i) / time.Duration(len(c.hcs)))
			for k := 1; ; k++ {
				if wait := time.Until(next); wait > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(wait):
					}
				}
				if ctx.Err() != nil {
					return
				}
				if err := c.post(context.WithoutCancel(ctx), i, k); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				done.Add(1)
				next = next.Add(interval)
				if now := time.Now(); next.Before(now) {
					next = now
				}
			}
		})
	}
	g.Wait()
	if p := firstErr.Load(); p != nil {
		return 0, *p
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}

// median of xs.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Sorted(slices.Values(xs))
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
