package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/projections"
)

// bootstrap records the evaluation settings when they differ from the ones
// in the log, and creates the default admin on a log that has none. Both
// are model changes under optimistic concurrency, so nodes that start
// together create one admin.
func bootstrap(ctx context.Context, w *api.Writer, store *projections.Store, sec api.Secrets, s *serveCmd, log *slog.Logger) error {
	cfg, err := store.Config()
	if err != nil {
		return err
	}
	want := posture.ConfigChanged{
		MFAGraceSeconds:          int64(s.MFAGrace.Seconds()),
		APISessionTimeoutSeconds: int64(s.APISessionTimeout.Seconds()),
	}
	if store.Cursor() == 0 || int64(cfg.MFAGrace.Seconds()) != want.MFAGraceSeconds ||
		int64(cfg.APISessionTimeout.Seconds()) != want.APISessionTimeoutSeconds {
		if err := modelChange(ctx, w, func() ([]posture.Payload, error) { return []posture.Payload{want}, nil }); err != nil {
			return fmt.Errorf("recording settings: %w", err)
		}
		log.Info("settings recorded in the log", "mfaGrace", s.MFAGrace, "apiSessionTimeout", s.APISessionTimeout)
	}

	var password string
	err = modelChange(ctx, w, func() ([]posture.Payload, error) {
		admin, err := defaultAdmin(store, s.AdminUsername)
		if err != nil {
			return nil, err
		}
		var out []posture.Payload
		now := w.Now()
		if admin == nil {
			if _, err := store.IdentityByName(s.AdminUsername); err == nil {
				return nil, fmt.Errorf("an identity named %q exists but is not the default admin", s.AdminUsername)
			}
			admin = &posture.Identity{
				ID: posture.NewID(), Name: s.AdminUsername, Type: posture.IdentityUser,
				IsAdmin: true, IsDefaultAdmin: true, RoleAttributes: []string{}, Tags: posture.Tags{},
				CreatedAt: now, UpdatedAt: now,
			}
			out = append(out, posture.Created[posture.Identity]{Entity: *admin})
		}
		auths, err := store.IdentityAuthenticators(admin.ID)
		if err != nil {
			return nil, err
		}
		if len(auths) > 0 {
			return out, nil
		}
		if _, err := store.AuthenticatorByUsername(s.AdminUsername); err == nil {
			return nil, fmt.Errorf("the username %q is taken by another identity", s.AdminUsername)
		} else if !errors.Is(err, posture.ErrNotFound) {
			return nil, err
		}
		password = s.AdminPassword
		if password == "" {
			password = rand.Text()
		}
		hash, err := api.SealedPasswordHash(ctx, sec, admin.ID, password)
		if err != nil {
			return nil, err
		}
		out = append(out, posture.Created[posture.Authenticator]{Entity: posture.Authenticator{
			ID: posture.NewID(), IdentityID: admin.ID, Method: posture.MethodPassword,
			Username: s.AdminUsername, PasswordHashSealed: hash,
			Tags: posture.Tags{}, CreatedAt: now, UpdatedAt: now,
		}})
		return out, nil
	})
	if err != nil {
		return fmt.Errorf("creating the default admin: %w", err)
	}
	if password != "" {
		log.Info("default admin created", "username", s.AdminUsername)
		if s.AdminPassword == "" {
			s.announce(log, fmt.Sprintf("postured: default admin %q created with password %s (shown once; set POSTURED_ADMIN_PASSWORD to choose it)", s.AdminUsername, password),
				"default admin password generated (shown once; set POSTURED_ADMIN_PASSWORD to choose it)", "username", s.AdminUsername, "password", password)
		}
	}
	return nil
}

// modelChange is Writer.Model outside a request.
func modelChange(ctx context.Context, w *api.Writer, decide func() ([]posture.Payload, error)) error {
	return w.ModelContext(ctx, api.Stamp{Actor: "postured"}, decide)
}

// defaultAdmin finds the default admin identity (nil: none). It is looked
// up by the admin username first, which is its name unless it was renamed,
// so that a start does not read every identity of a large model.
func defaultAdmin(store *projections.Store, username string) (*posture.Identity, error) {
	if id, err := store.IdentityByName(username); err == nil && id.IsDefaultAdmin {
		return &id, nil
	} else if err != nil && !errors.Is(err, posture.ErrNotFound) {
		return nil, err
	}
	ids, err := store.Identities()
	if err != nil {
		return nil, err
	}
	for i := range ids {
		if ids[i].IsDefaultAdmin {
			return &ids[i], nil
		}
	}
	return nil, nil
}
