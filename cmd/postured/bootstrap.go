package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

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
	passwordFile, err := filepath.Abs(filepath.Join(s.DataDir, adminPasswordFile))
	if err != nil {
		return err
	}
	existed := false
	err = modelChange(ctx, w, func() ([]posture.Payload, error) {
		if password != "" && s.AdminPassword == "" {
			// An attempt that lost to another node's: its password was
			// never recorded.
			if err := os.Remove(passwordFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
		password, existed = "", false
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
			existed = true
			return out, nil
		}
		if _, err := store.AuthenticatorByUsername(s.AdminUsername); err == nil {
			return nil, fmt.Errorf("the username %q is taken by another identity", s.AdminUsername)
		} else if !errors.Is(err, posture.ErrNotFound) {
			return nil, err
		}
		password = s.AdminPassword
		if password == "" {
			// Generated, it goes to a file of the data directory, never
			// to the log (which a journal keeps), before it is recorded:
			// a password recorded is never one nobody was told.
			password = rand.Text()
			if err := writeSecretFile(passwordFile, password+"\n"); err != nil {
				return nil, fmt.Errorf("write the generated password: %w", err)
			}
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
		// The file stays: the change may have been recorded all the same
		// (a start stopped while it waited for the projection); the next
		// start removes the file if its password is not the admin's.
		return fmt.Errorf("creating the default admin: %w", err)
	}
	switch {
	case existed:
		if s.AdminPassword != "" {
			log.Info("POSTURED_ADMIN_PASSWORD is for the first start: the default admin exists and keeps its password (postured admin recover sets a new one)")
		}
		if err := generatedPasswordChanged(ctx, store, sec, s.AdminUsername, passwordFile, log); err != nil {
			// Housekeeping: it does not stop the node.
			log.Warn("could not tell whether the default admin's generated password was changed", "file", passwordFile, "err", err)
		}
		return nil
	case password != "" && s.AdminPassword == "":
		s.announce(log, fmt.Sprintf("postured: default admin %q created; its generated password is in %s (yours alone to read: sign in and change the password, and the next start deletes the file; set POSTURED_ADMIN_PASSWORD to choose it)", s.AdminUsername, passwordFile),
			"default admin created with a generated password, in the file", "username", s.AdminUsername, "file", passwordFile)
	case password != "":
		log.Info("default admin created", "username", s.AdminUsername)
	}
	return nil
}

// adminPasswordFile is the file of the data directory that holds the
// default admin's generated password until it is changed.
const adminPasswordFile = "admin-password"

// writeSecretFile writes data to a new file only its owner may read.
func writeSecretFile(path, data string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// generatedPasswordChanged removes the file of the generated password once
// the default admin's password is another, and otherwise says that it is
// still there.
func generatedPasswordChanged(ctx context.Context, store *projections.Store, sec api.Secrets, username, path string, log *slog.Logger) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	admin, err := defaultAdmin(store, username)
	if err != nil || admin == nil {
		return err
	}
	auths, err := store.IdentityAuthenticators(admin.ID)
	if err != nil {
		return err
	}
	for _, au := range auths {
		if au.Method != posture.MethodPassword {
			continue
		}
		hash, err := api.PasswordHashOf(ctx, sec, au)
		if err != nil {
			return err
		}
		if ok, err := api.CheckPassword(ctx, hash, strings.TrimSpace(string(data))); err != nil || ok {
			if ok {
				log.Warn("the default admin's generated password is unchanged, and still in its file: change it (the next start deletes the file)", "file", path)
			}
			return err
		}
	}
	log.Info("the default admin's password was changed: its generated one's file is removed", "file", path)
	return os.Remove(path)
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
