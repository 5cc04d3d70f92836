package api

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/seed-0809debe/posture"
)

// CheckTags validates a tag map: values are null, strings or booleans; keys
// have at most MaxLabel characters, string values at most MaxTagValue, and
// the map as JSON at most MaxTagsJSON bytes. A nil map becomes an empty one.
func CheckTags(t posture.Tags) (posture.Tags, error) { return CheckTagsAt("tags", t) }

// CheckTagsAt is CheckTags for a field of another name (appData).
func CheckTagsAt(field string, t posture.Tags) (posture.Tags, error) {
	if t == nil {
		return posture.Tags{}, nil
	}
	for k, v := range t {
		if n := utf8.RuneCountInString(k); n > MaxLabel {
			return nil, posture.Invalid(field, fmt.Sprintf("tag names must be at most %d characters", MaxLabel), fmt.Sprintf("(a name of %d characters)", n))
		}
		switch v := v.(type) {
		case nil, bool:
		case string:
			if err := CheckMax(field+"."+k, v, MaxTagValue); err != nil {
				return nil, err
			}
		default:
			return nil, posture.Invalid(field+"."+k, "tag values must be null, a string or a boolean", v)
		}
	}
	data, err := json.Marshal(t)
	if err != nil {
		return nil, posture.Invalid(field, err.Error(), nil)
	}
	if len(data) > MaxTagsJSON {
		return nil, posture.Invalid(field, fmt.Sprintf("must be at most %d bytes as JSON", MaxTagsJSON), fmt.Sprintf("(%d bytes)", len(data)))
	}
	return t, nil
}

// CheckTagsText refuses tags whose names or string values CheckText
// refuses: tags an endpoint sets (a session's), which admins read.
func CheckTagsText(field string, t posture.Tags) error {
	for k, v := range t {
		if err := CheckText(field, k); err != nil {
			return err
		}
		if v, ok := v.(string); ok {
			if err := CheckText(field+"."+k, v); err != nil {
				return err
			}
		}
	}
	return nil
}
