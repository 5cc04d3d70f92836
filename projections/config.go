package projections

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/seed-0809debe/posture"
)

var configKey = []byte("e/config/current")

func init() {
	on(func(tx *Tx, e posture.Event, p posture.ConfigChanged) error {
		return tx.put(configKey, p)
	})
	on(func(tx *Tx, e posture.Event, p posture.IdentityServiceConfigsSet) error {
		if _, found, err := getOld[posture.Identity](tx, posture.KindIdentity, p.IdentityID); err != nil || !found {
			return err
		}
		// Its clients' services change: their indicator moves, so that
		// they read them again.
		if err := markChanged(tx, p.IdentityID, e.At); err != nil {
			return err
		}
		if len(p.Configs) == 0 {
			return dropServiceConfigs(tx, p.IdentityID)
		}
		return tx.put(serviceConfigsKey(p.IdentityID), p.Configs)
	})
}

// Identity service config keys:
//
//	e/identity-service-configs/<identityId>  service id -> config type id -> config id
func serviceConfigsKey(identityID string) []byte {
	return entityKey(posture.KindIdentityServiceConfigs, identityID)
}

func dropServiceConfigs(tx *Tx, identityID string) error {
	return tx.del(serviceConfigsKey(identityID))
}

// markServiceConfigUsers moves the change indicator of the identities that
// have the config as a service config of their own.
func markServiceConfigUsers(tx *Tx, configID string) error {
	prefix := entityPrefix(posture.KindIdentityServiceConfigs)
	var users []string
	err := scan(tx.b, prefix, func(key, value []byte) (bool, error) {
		var configs map[string]map[string]string
		if err := unmarshal(value, &configs); err != nil {
			return false, fmt.Errorf("decode %s: %w", key, err)
		}
		for _, byType := range configs {
			if slices.Contains(slices.Collect(maps.Values(byType)), configID) {
				users = append(users, string(key[len(prefix):]))
				break
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, id := range users {
		if err := markChanged(tx, id, tx.event.At); err != nil {
			return err
		}
	}
	return nil
}

// IdentityServiceConfigs returns an identity's own service configs: a
// service id to a config type id to a config id (nil for none).
func (s *Store) IdentityServiceConfigs(identityID string) (map[string]map[string]string, error) {
	var out map[string]map[string]string
	_, err := getJSON(s.r(), serviceConfigsKey(identityID), &out)
	return out, err
}

// Default settings in force before the first config.changed event.
const (
	DefaultMFAGrace          = 5 * time.Minute
	DefaultAPISessionTimeout = 30 * time.Minute
)

// Config is the evaluation settings recorded in the log.
type Config struct {
	MFAGrace          time.Duration
	APISessionTimeout time.Duration
}

// Config returns the settings in force at the cursor.
func (s *Store) Config() (Config, error) {
	return readConfig(s.r())
}

func readConfig(r reader) (Config, error) {
	c := Config{MFAGrace: DefaultMFAGrace, APISessionTimeout: DefaultAPISessionTimeout}
	var p posture.ConfigChanged
	found, err := getJSON(r, configKey, &p)
	if err != nil || !found {
		return c, err
	}
	if p.MFAGraceSeconds > 0 {
		c.MFAGrace = time.Duration(p.MFAGraceSeconds) * time.Second
	}
	if p.APISessionTimeoutSeconds > 0 {
		c.APISessionTimeout = time.Duration(p.APISessionTimeoutSeconds) * time.Second
	}
	return c, nil
}
