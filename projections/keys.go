package projections

import "strings"

// Key layout. Every key starts with a one-letter space:
//
//	c                                cursor: big-endian sequence of the last applied event
//	m                                sequence of the last applied event on the model subject
//	e/<kind>/<id>                    entity record (JSON)
//	u/<kind>/<index>/<value>         unique index: value -> id
//	r/<kind>/<id>/<child>/<childId>  relation: child entities of an entity
const sep = "/"

var (
	cursorKey = []byte("c")
	modelKey  = []byte("m")
)

// Kinds of entities. They double as the collection names of the API.
const (
	KindIdentity      = "identities"
	KindAuthenticator = "authenticators"
	KindAPISession    = "apiSessions"
)

func entityKey(kind, id string) []byte { return []byte("e/" + kind + sep + id) }

func entityPrefix(kind string) []byte { return []byte("e/" + kind + sep) }

func uniqueKey(kind, index, value string) []byte {
	return []byte("u/" + kind + sep + index + sep + value)
}

func relationKey(kind, id, child, childID string) []byte {
	return []byte(strings.Join([]string{"r", kind, id, child, childID}, sep))
}

func relationPrefix(kind, id, child string) []byte {
	return []byte(strings.Join([]string{"r", kind, id, child, ""}, sep))
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
