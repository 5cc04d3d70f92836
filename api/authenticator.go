package api

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/seed-0809debe/posture"
)

// AuthenticatorChange is a validated update of a password authenticator:
// a nil field is left as it is.
type AuthenticatorChange struct {
	Username        *string
	Password        *string
	CurrentPassword string
	Tags            *posture.Tags
}

// ParseAuthenticatorChange validates an update body against the bounds of
// the seed (section 2.7): username 4 to 100 characters, password and
// currentPassword 5 to 100. Username and password are required on a full
// update (PUT), currentPassword whenever needCurrent (an identity changing
// its own; an administrator does not give it).
func ParseAuthenticatorChange(body []byte, patch, needCurrent bool) (AuthenticatorChange, error) {
	var ch AuthenticatorChange
	var fields map[string]json.RawMessage
	if err := DecodeBytes(body, &fields); err != nil {
		return ch, &posture.Error{Code: posture.CodeCouldNotParseBody, Message: "the body must be a JSON object"}
	}
	str := func(name string, lo, hi int, required bool) (*string, error) {
		raw, ok := fields[name]
		if !ok || string(raw) == "null" {
			if required {
				return nil, posture.Invalid(name, "is required", nil)
			}
			return nil, nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			var value any = json.RawMessage(raw)
			if name != "username" {
				value = "********" // never echo a password
			}
			return nil, posture.Invalid(name, "must be a string", value)
		}
		if err := CheckLength(name, s, lo, hi); err != nil {
			return nil, err
		}
		return &s, nil
	}
	var err error
	if needCurrent {
		cur, err := str("currentPassword", MinPassword, MaxPassword, true)
		if err != nil {
			return ch, err
		}
		ch.CurrentPassword = *cur
	}
	if ch.Username, err = str("username", MinUsername, MaxUsername, !patch); err != nil {
		return ch, err
	}
	if ch.Password, err = str("password", MinPassword, MaxPassword, !patch); err != nil {
		return ch, err
	}
	if raw, ok := fields["tags"]; ok || !patch {
		var t posture.Tags
		if ok {
			if err := json.Unmarshal(raw, &t); err != nil {
				return ch, posture.Invalid("tags", "must be an object or null", json.RawMessage(raw))
			}
		}
		if t, err = CheckTags(t); err != nil {
			return ch, err
		}
		if err := CheckTagsText("tags", t); err != nil { // an endpoint's own, which admins read
			return ch, err
		}
		ch.Tags = &t
	}
	return ch, nil
}

// Usernames finds who has a username: a password authenticator, or a
// pending updb enrollment, whose redemption makes one with it.
type Usernames interface {
	AuthenticatorByUsername(username string) (posture.Authenticator, error)
	EnrollmentByUsername(username string) (posture.Enrollment, error)
}

// UsernameFree fails (400 on field) when an authenticator or a pending updb
// enrollment has the username.
func UsernameFree(names Usernames, field, username string) error {
	if _, err := names.AuthenticatorByUsername(username); err == nil {
		return posture.Invalid(field, "username is already in use", username)
	} else if !errors.Is(err, posture.ErrNotFound) {
		return err
	}
	if _, err := names.EnrollmentByUsername(username); err == nil {
		return posture.Invalid(field, "username is already in use by an enrollment", username)
	} else if !errors.Is(err, posture.ErrNotFound) {
		return err
	}
	return nil
}

// Apply is au with the change made at now: a new username (CheckUsername,
// and free), the new password's sealed hash when one was given ("" keeps
// the password), new tags.
func (ch AuthenticatorChange) Apply(au posture.Authenticator, sealedHash string, names Usernames, now time.Time) (posture.Authenticator, error) {
	if ch.Username != nil && *ch.Username != au.Username {
		if err := CheckUsername("username", *ch.Username); err != nil {
			return au, err
		}
		if err := UsernameFree(names, "username", *ch.Username); err != nil {
			return au, err
		}
		au.Username = *ch.Username
	}
	if sealedHash != "" {
		au.PasswordHashSealed, au.PasswordHash = sealedHash, ""
	}
	if ch.Tags != nil {
		au.Tags = *ch.Tags
	}
	au.UpdatedAt = now
	return au, nil
}
