package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// freePort is a loopback address no one listens on right now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// histogram is the cumulative count of one route's request durations as
// postured measures them (inside its handler chain), by upper bound in
// seconds.
type histogram map[float64]float64

// scrapeSessions reads postured's duration histogram of POST /sessions from
// its plain-HTTP metrics listener.
func scrapeSessions(ctx context.Context, metricsAddr string) (histogram, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metricsAddr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	h := histogram{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "postured_http_request_duration_seconds_bucket{") ||
			!strings.Contains(line, `method="POST"`) || !strings.Contains(line, `route="/edge/client/v1/sessions"`) {
			continue
		}
		_, le, _ := strings.Cut(line, `le="`)
		le, rest, _ := strings.Cut(le, `"}`)
		bound := math.Inf(1)
		if le != "+Inf" {
			if bound, err = strconv.ParseFloat(le, 64); err != nil {
				return nil, err
			}
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			return nil, err
		}
		h[bound] = n
	}
	if len(h) == 0 {
		return nil, fmt.Errorf("no POST /sessions histogram at %s", metricsAddr)
	}
	return h, sc.Err()
}

// over is how many requests between two scrapes took longer than bound
// seconds inside postured (bound must be a bucket's), and how many there
// were in all.
func over(before, after histogram, bound float64) (n, total float64) {
	total = after[math.Inf(1)] - before[math.Inf(1)]
	return total - (after[bound] - before[bound]), total
}
