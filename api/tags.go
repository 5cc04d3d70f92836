package api

import "github.com/seed-0809debe/posture"

// CheckTags validates a tag map: values are null, strings or booleans. A
// nil map becomes an empty one.
func CheckTags(t posture.Tags) (posture.Tags, error) {
	if t == nil {
		return posture.Tags{}, nil
	}
	for k, v := range t {
		switch v.(type) {
		case nil, string, bool:
		default:
			return nil, posture.Invalid("tags."+k, "tag values must be null, a string or a boolean", v)
		}
	}
	return t, nil
}
