package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/projections"
)

type adminCmd struct {
	Recover adminRecoverCmd `cmd:"" help:"Give the default admin its way in back, as an operator with the log and the keys: remove its MFA, end every API session it has and, with POSTURED_ADMIN_PASSWORD set, set its password."`
}

// adminRecoverCmd is the break-glass of the default admin, whose
// credentials no other admin may change: whoever holds the log (a stopped
// node's data directory, or a cluster with postured's NATS credentials)
// and the secrets key records, under their own name, the removal of its
// MFA, the end of its API sessions and a new password.
type adminRecoverCmd struct {
	logFlags
	PKIDir         string `name:"pki-dir" help:"Directory of the nodes' CA and secrets key (default: <data-dir>/pki)."`
	SecretsKeyFile string `name:"secrets-key-file" help:"The nodes' secrets key, which seals the new password's hash (default: <pki-dir>/secrets.key)."`
	Actor          string `help:"Who recovers (recorded in the log; default: <user>@<host>)."`
}

func (x *adminRecoverCmd) Help() string {
	return "Run it on a stopped node's --data-dir, or with --nats-url and postured's NATS credentials (the auditor's may not write). " +
		"The new password, if any, comes from POSTURED_ADMIN_PASSWORD, never from the command line."
}

func (x *adminRecoverCmd) Run(ctx context.Context, s streams) error {
	password := os.Getenv("POSTURED_ADMIN_PASSWORD")
	if password != "" {
		if err := api.CheckLength("POSTURED_ADMIN_PASSWORD", password, api.MinPassword, api.MaxPassword); err != nil {
			return usageError{err}
		}
	}
	actor := x.Actor
	if actor == "" {
		actor = defaultActor()
	}
	l, err := x.openToWrite(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	// The subjects' last events before the state is read: a change made
	// meanwhile (by the default admin itself) makes the recovery stop
	// rather than undo it.
	lastModel, err := l.LastSubjectSeq(ctx, posture.SubjectModel)
	if err != nil {
		return err
	}
	store, err := replayInMemory(ctx, l.Log, cutoff{})
	if err != nil {
		return err
	}
	defer store.Close()
	recoverReplayed()
	admin, err := defaultAdmin(store, "admin")
	if err != nil {
		return err
	}
	if admin == nil {
		return errors.New("no default admin in this log: a node creates it on its first start")
	}
	now := time.Now().UTC()
	var done []string
	appendOne := func(p posture.Payload, expect uint64, conditional bool) (uint64, error) {
		e, err := posture.NewEvent(p, now)
		if err != nil {
			return 0, err
		}
		e.Actor = actor
		if !conditional {
			return l.Append(ctx, e)
		}
		seq, err := l.AppendIfLast(ctx, e, expect)
		if posture.CodeOf(err) == posture.CodeConflict {
			return 0, fmt.Errorf("%s changed while it was read: run the command again", p.Subject())
		}
		return seq, err
	}
	if password != "" {
		au, err := adminPassword(store, admin.ID)
		if err != nil {
			return err
		}
		sec, err := x.secrets(ctx, l.Log)
		if err != nil {
			return err
		}
		if au.PasswordHashSealed, err = api.SealedPasswordHash(ctx, sec, admin.ID, password); err != nil {
			return err
		}
		au.PasswordHash, au.UpdatedAt = "", now
		seq, err := appendOne(posture.Updated[posture.Authenticator]{Entity: au}, lastModel, true)
		if err != nil {
			return err
		}
		done = append(done, fmt.Sprintf("password of %s set (sequence %d)", pr(au.Username), seq))
	}
	mfaSubject := posture.SubjectFor(posture.SubjectMFA, admin.ID)
	if _, err := store.MFA(admin.ID); err == nil {
		lastMFA, err := l.LastSubjectSeq(ctx, mfaSubject)
		if err != nil {
			return err
		}
		seq, err := appendOne(posture.MFARemoved{IdentityID: admin.ID, By: posture.MFARemovedByOperator}, lastMFA, true)
		if err != nil {
			return err
		}
		done = append(done, fmt.Sprintf("MFA removed (sequence %d)", seq))
	} else if !errors.Is(err, posture.ErrNotFound) {
		return err
	}
	// One event ends every API session the admin has where it lands in the
	// log, also those of logins recorded since the replay read it; a login
	// with the old password recorded after the new one starts none.
	has, err := store.HasAPISession(admin.ID)
	if err != nil {
		return err
	}
	if has || len(done) > 0 {
		seq, err := appendOne(posture.APISessionsEnded{IdentityID: admin.ID, Reason: "recovered by an operator"}, 0, false)
		if err != nil {
			return err
		}
		done = append(done, fmt.Sprintf("its API sessions ended (sequence %d)", seq))
	}
	if len(done) == 0 {
		_, err = fmt.Fprintf(s.out, "nothing to recover for the default admin %s (%s): no MFA, no API session; set POSTURED_ADMIN_PASSWORD to set its password\n", pr(admin.Name), admin.ID)
		return err
	}
	_, err = fmt.Fprintf(s.out, "default admin %s (%s), recovered by %s: %s\n", pr(admin.Name), admin.ID, pr(actor), strings.Join(done, "; "))
	return err
}

// recoverReplayed is called when admin recover has read the log: a test
// logs in there, as a login on a running cluster can.
var recoverReplayed = func() {}

// adminPassword is the default admin's password authenticator.
func adminPassword(store *projections.Store, identityID string) (posture.Authenticator, error) {
	auths, err := store.IdentityAuthenticators(identityID)
	if err != nil {
		return posture.Authenticator{}, err
	}
	for _, au := range auths {
		if au.Method == posture.MethodPassword {
			return au, nil
		}
	}
	return posture.Authenticator{}, errors.New("the default admin has no password authenticator to set")
}

// secrets opens the nodes' keyring: their key must be there (a new one
// would seal what no node can open).
func (x *adminRecoverCmd) secrets(ctx context.Context, l *eventlog.Log) (api.Secrets, error) {
	sc := &serveCmd{DataDir: x.DataDir, PKIDir: x.PKIDir, SecretsKeyFile: x.SecretsKeyFile}
	path := sc.secretsKeyFile()
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no secrets key at %s: the nodes' key seals the new password's hash; give it with --secrets-key-file (%w)", path, err)
	}
	return openSecrets(ctx, sc, l, slog.New(slog.DiscardHandler))
}
