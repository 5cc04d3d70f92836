package projections

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/seed-0809debe/posture"
)

// Key layout. Every key starts with a one-letter space:
//
//	c                                cursor: big-endian sequence of the last applied event
//	m                                sequence of the last applied event on the model subject
//	v                                layout version (big-endian)
//	e/<kind>/<id>                    entity record (JSON)
//	u/<kind>/<index>/<value>         unique index: value -> id
//	r/<kind>/<id>/<child>/<childId>  relation: child entities of an entity
const sep = "/"

var (
	cursorKey = []byte("c")
	modelKey  = []byte("m")
	layoutKey = []byte("v")
)

// layout is the version of the key layout and value encodings. A projection
// of another layout is discarded when opened and rebuilt from the log.
// Projections without a version are layout 1; layout 2 keeps an event's
// history entries for an identity under one key; layout 3 finds one-time
// enrollment tokens by their hash (never by the token in clear) and keeps
// what an identity's clients last reported (e/identity-clients/<identityId>);
// layout 4 adds the fleet summary (summary.go) and the transitions outbox;
// layout 5 adds report-only checks: the report standing, would-denies and
// the enforceAt index (enforcement.go).
// layout 6 adds the fleet-wide index of failed service requests (p/g/);
// layout 7 bounds the processes kept per identity (maxProcesses);
// layout 8 bounds them in bytes too (maxProcessBytes), ends an identity's API
// sessions when it is disabled and starts none while it is;
// layout 9 gives a PROCESS check's expected value the controller's shape
// (one signerFingerprint) and bounds an identity's API sessions
// (MaxAPISessions);
// layout 10 moves an identity's change indicator (p/c/) when a wake or
// unlock starts or moves an MFA grace, and records one history entry per
// fact a posture event set (postureHistory);
// layout 11 ends the API sessions of a deleted authenticator, and those of
// certificates a deleted CA issued;
// layout 12 relates a config to the services that carry it
// (r/configs/<id>/services/<serviceId>), whose clients a change of the
// config moves;
// layout 13 starts no API session of a login whose authenticator, or the CA
// that verified its certificate, was deleted before the login was recorded,
// and a CA's delete ends the sessions it verified through intermediates;
// layout 14 moves the change indicator of the identities that have a config
// of their own when it changes; layout 15 also when it is deleted;
// layout 16 keeps an API session's MFA timeout, once an evaluation found
// it, until MFA is passed again (posture.SessionPosture.MFATimedOutAt);
// layout 17 reads a Windows process at its newest report in any case;
// layout 18 keeps an identity's processes by path and check id, and a
// PROCESS check reads only the reports that answered it;
// layout 19 records the changes of an identity's credentials in its
// history (posture.HistoryCredential), and keeps which API session used
// an enrollment's last TOTP (posture.MFA.LastCounterAPISession).
const layout = 19

// timeKey formats t for a time index: nanoseconds since 1970 in 20 digits,
// so that keys sort in time order. Times an int64 of nanoseconds cannot
// hold are clamped to its ends: a deadline in the year 9999 sorts last (and
// is never due), not first, and a time before 1970 sorts first.
func timeKey(t time.Time) string {
	var n int64
	switch {
	case t.Before(time.Unix(0, 0)):
	case t.After(time.Unix(0, math.MaxInt64)):
		n = math.MaxInt64
	default:
		n = t.UnixNano()
	}
	return fmt.Sprintf("%020d", n)
}

func entityKey(kind posture.Kind, id string) []byte { return []byte("e/" + string(kind) + sep + id) }

func entityPrefix(kind posture.Kind) []byte { return []byte("e/" + string(kind) + sep) }

func uniqueKey(kind posture.Kind, index, value string) []byte {
	return []byte("u/" + string(kind) + sep + index + sep + value)
}

func relationKey(kind posture.Kind, id string, child posture.Kind, childID string) []byte {
	return []byte(strings.Join([]string{"r", string(kind), id, string(child), childID}, sep))
}

func relationPrefix(kind posture.Kind, id string, child posture.Kind) []byte {
	return []byte(strings.Join([]string{"r", string(kind), id, string(child), ""}, sep))
}

// prefixEnd is the smallest key greater than every key with the prefix.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// appendPosition appends e's position in the log to a key prefix: its
// message's sequence in 20 digits, and for the second and later events of
// a batch of the log's, "-" and their index in it. Keys so made sort in
// the log's order, and those of unbatched events are the sequence alone.
func appendPosition(prefix []byte, e posture.Event) []byte {
	key := fmt.Appendf(append([]byte(nil), prefix...), "%020d", e.Seq)
	if e.Part > 0 {
		key = fmt.Appendf(key, "-%03d", e.Part)
	}
	return key
}
