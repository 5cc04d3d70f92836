package api

import (
	"context"
	"errors"
)

// Secrets seals the secret fields of events and opens them where the API
// must read one back: verifying a TOTP, showing an enrollment JWT or a
// session token to its rightful reader. Values are sealed for an owner (an
// identity, an edge router, a CA) and a field (posture.Field...); Destroy
// erases an owner's key, and every value sealed for it becomes unreadable.
// cmd passes in a *secrets.Keyring.
type Secrets interface {
	SealString(ctx context.Context, owner, field, plain string) (string, error)
	OpenString(ctx context.Context, owner, field, sealed string) (string, error)
	Destroy(ctx context.Context, owner string) error
}

// errNoSecrets is the error of a node wired without Secrets.
var errNoSecrets = errors.New("api: no secrets keyring configured")

// Seal seals plain for an owner's field ("" stays "").
func Seal(ctx context.Context, s Secrets, owner, field, plain string) (string, error) {
	if plain == "" {
		return "", nil
	}
	if s == nil {
		return "", errNoSecrets
	}
	return s.SealString(ctx, owner, field, plain)
}

// Reveal returns a field's clear value: the sealed form opened, or, for a
// record of a log written before secrets were sealed, the legacy clear form.
func Reveal(ctx context.Context, s Secrets, owner, field, sealed, legacy string) (string, error) {
	if sealed == "" {
		return legacy, nil
	}
	if s == nil {
		return "", errNoSecrets
	}
	return s.OpenString(ctx, owner, field, sealed)
}

// DestroySecrets erases the data key of an owner that was deleted (nil
// Secrets: nothing to do).
func DestroySecrets(ctx context.Context, s Secrets, owner string) error {
	if s == nil {
		return nil
	}
	return s.Destroy(ctx, owner)
}
