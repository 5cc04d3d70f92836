package api_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// optimisticLog is a log with optimistic concurrency, its projection
// applied at once: AppendIfLast refuses an event when its subject moved on.
type optimisticLog struct {
	mu        sync.Mutex
	seq       uint64
	last      map[string]uint64 // subject -> its last sequence
	conflicts int
}

func (l *optimisticLog) Append(_ context.Context, e posture.Event) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	l.last[e.Subject] = l.seq
	return l.seq, nil
}

func (l *optimisticLog) Fits(posture.Event) error { return nil }

func (l *optimisticLog) AppendIfLast(ctx context.Context, e posture.Event, last uint64) (uint64, error) {
	l.mu.Lock()
	if l.last[e.Subject] != last {
		l.conflicts++
		l.mu.Unlock()
		return 0, &posture.Error{Code: posture.CodeConflict}
	}
	l.mu.Unlock()
	return l.Append(ctx, e)
}

func (l *optimisticLog) LastSubjectSeq(_ context.Context, subject string) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last[subject], nil
}

func (l *optimisticLog) WaitFor(context.Context, uint64) error { return nil }

func (l *optimisticLog) LastModelSeq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last[posture.SubjectModel]
}

// Concurrent changes of one subject on one node take turns: none races
// another, so none is decided twice, and each sees the changes before it.
func TestChangesTakeTurns(t *testing.T) {
	log := &optimisticLog{last: map[string]uint64{}}
	w := &api.Writer{Log: log, Barrier: log, Now: time.Now}
	const changes = 32
	var mu sync.Mutex
	decided, seen := 0, map[uint64]bool{}
	var wg sync.WaitGroup
	for i := range changes {
		wg.Go(func() {
			err := w.ModelContext(context.Background(), api.Stamp{}, func() ([]posture.Payload, error) {
				mu.Lock()
				decided++
				mu.Unlock()
				// The state decided on: no two changes may decide on the same.
				before := log.LastModelSeq()
				time.Sleep(time.Millisecond) // a decision takes a while
				mu.Lock()
				defer mu.Unlock()
				if seen[before] {
					return nil, fmt.Errorf("change %d decided on the state of sequence %d, as another did", i, before)
				}
				seen[before] = true
				return []posture.Payload{posture.Created[posture.Service]{Entity: posture.Service{ID: fmt.Sprintf("svc-%d", i)}}}, nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if decided != changes || log.conflicts != 0 {
		t.Fatalf("%d decisions and %d conflicts for %d changes, want %[3]d and none", decided, log.conflicts, changes)
	}
	if log.seq != changes {
		t.Fatalf("%d events appended, want %d", log.seq, changes)
	}
}

// A change waiting for its turn leaves when its request ends, and the
// subject's next change still goes.
func TestChangeLeavesItsTurn(t *testing.T) {
	log := &optimisticLog{last: map[string]uint64{}}
	w := &api.Writer{Log: log, Barrier: log, Now: time.Now}
	hold, held := make(chan struct{}), make(chan struct{})
	go w.ModelContext(context.Background(), api.Stamp{}, func() ([]posture.Payload, error) {
		close(held)
		<-hold
		return nil, nil
	})
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := w.ModelContext(ctx, api.Stamp{}, func() ([]posture.Payload, error) {
		return nil, errors.New("decided while another change of the subject went on")
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the waiting change ended with %v, want its deadline", err)
	}
	close(hold)
	if err := w.ModelContext(context.Background(), api.Stamp{}, func() ([]posture.Payload, error) {
		return []posture.Payload{posture.Created[posture.Service]{Entity: posture.Service{ID: "svc"}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A change that waited too long for its turn (a log that does not answer
// holds the change before it) goes without it, racing as a change through
// another node does; the held change then loses its race and decides again.
func TestChangeGoesWithoutItsTurnAfterAWhile(t *testing.T) {
	defer api.SetTurnWait(20 * time.Millisecond)()
	log := &optimisticLog{last: map[string]uint64{}}
	w := &api.Writer{Log: log, Barrier: log, Now: time.Now}
	hold, held := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	decisions := 0
	go func() {
		first <- w.ModelContext(context.Background(), api.Stamp{}, func() ([]posture.Payload, error) {
			if decisions++; decisions == 1 {
				close(held)
				<-hold
			}
			return []posture.Payload{posture.Created[posture.Service]{Entity: posture.Service{ID: "held"}}}, nil
		})
	}()
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.ModelContext(ctx, api.Stamp{}, func() ([]posture.Payload, error) {
		return []posture.Payload{posture.Created[posture.Service]{Entity: posture.Service{ID: "late"}}}, nil
	}); err != nil {
		t.Fatalf("the change behind a held one: %v", err)
	}
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if decisions != 2 || log.conflicts != 1 || log.seq != 2 {
		t.Fatalf("the held change decided %d times, %d conflicts, %d events: want 2, 1 and 2", decisions, log.conflicts, log.seq)
	}
}

// A change whose later event cannot be encoded (a time past year 9999)
// appends none of its events, in a chain or not.
func TestChangeThatCannotBeEncodedAppendsNothing(t *testing.T) {
	log := &optimisticLog{last: map[string]uint64{}}
	w := &api.Writer{Log: log, Barrier: log, Now: time.Now}
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	payloads := []posture.Payload{
		posture.Deleted[posture.Authenticator]{ID: "auth-1"},
		posture.Created[posture.Enrollment]{Entity: posture.Enrollment{ID: "enr-1", ExpiresAt: far}},
	}
	if err := w.ModelContext(context.Background(), api.Stamp{}, func() ([]posture.Payload, error) { return payloads, nil }); err == nil {
		t.Fatal("a change with an event that cannot be encoded succeeded")
	}
	err := w.Change(context.Background(), api.Stamp{}, api.Change{Subject: posture.SubjectModel,
		Expect: func(context.Context) (uint64, error) { return log.LastModelSeq(), nil },
		Decide: func() ([]posture.Payload, error) { return payloads, nil }})
	if err == nil {
		t.Fatal("a change with an event that cannot be encoded succeeded")
	}
	if log.seq != 0 {
		t.Fatalf("%d events appended, want none", log.seq)
	}
}
