package eventlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ensureStream opens the stream cfg names, creating it when it does not
// exist. An existing stream is updated only when its configuration differs
// from cfg in what postured relies on, and an update the user may not make
// is not an error: the postured role may create streams but not change
// them (a changed limit or retention could drop history), so that a
// running configuration is an administrator's. Such a difference is
// logged, naming the fields.
func (l *Log) ensureStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := l.js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if s, err = l.js.CreateStream(ctx, cfg); err == nil {
			return s, nil
		}
	}
	if err != nil {
		if denied := l.streamDenied(cfg.Name); denied != nil {
			return nil, denied
		}
		return nil, err
	}
	diff := streamDiff(s.CachedInfo().Config, cfg)
	if len(diff) == 0 {
		return s, nil
	}
	uctx, cancel := context.WithTimeout(ctx, updateAttempt)
	defer cancel()
	updated, err := l.js.UpdateStream(uctx, cfg)
	if err == nil {
		l.log.Info("eventlog: stream configuration updated", "stream", cfg.Name, "fields", strings.Join(diff, ","))
		return updated, nil
	}
	if denied := l.denied("$JS.API.STREAM.UPDATE." + cfg.Name); denied != nil || errors.Is(err, context.DeadlineExceeded) {
		l.log.Warn("eventlog: the stream's configuration differs from what postured would set, and these credentials may not change it: an administrator may",
			"stream", cfg.Name, "fields", strings.Join(diff, ","))
		return s, nil
	}
	return nil, fmt.Errorf("update: %w", err)
}

// updateAttempt bounds an update that a user without the permission gets
// no answer to (only an asynchronous permissions violation).
const updateAttempt = 3 * time.Second

// streamDiff names the fields in which have differs from want, where postured relies on them: what the stream holds, how
// long, and how it deduplicates. Limits compare as unlimited when not
// positive (the server stores unset limits as -1).
func streamDiff(have, want jetstream.StreamConfig) []string {
	limit := func(v int64) int64 { return max(v, 0) }
	var diff []string
	add := func(name string, differs bool) {
		if differs {
			diff = append(diff, name)
		}
	}
	add("subjects", !slices.Equal(have.Subjects, want.Subjects))
	add("replicas", max(have.Replicas, 1) != max(want.Replicas, 1))
	add("retention", have.Retention != want.Retention)
	add("discard", have.Discard != want.Discard)
	add("duplicate_window", want.Duplicates > 0 && have.Duplicates != want.Duplicates)
	add("allow_direct", have.AllowDirect != want.AllowDirect)
	add("allow_rollup_hdrs", have.AllowRollup != want.AllowRollup)
	add("max_msgs", limit(have.MaxMsgs) != limit(want.MaxMsgs))
	add("max_bytes", limit(have.MaxBytes) != limit(want.MaxBytes))
	add("max_age", have.MaxAge != want.MaxAge)
	add("max_msgs_per_subject", limit(have.MaxMsgsPerSubject) != limit(want.MaxMsgsPerSubject))
	return diff
}

// streamDenied is the error of a stream these credentials may not look up
// or create (a user without the permission gets no answer, only an
// asynchronous permissions violation, so the request times out): they are
// read-only credentials, such as the auditor's, where postured's are
// needed. Not worth a retry.
func (l *Log) streamDenied(name string) error {
	for _, op := range []string{"INFO", "CREATE"} {
		if denied := l.denied("$JS.API.STREAM." + op + "." + name); denied != nil {
			return fmt.Errorf("%s (STREAM.%s %s): %w", readOnly, op, name, denied)
		}
	}
	return nil
}
