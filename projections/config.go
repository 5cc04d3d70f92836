package projections

import (
	"time"

	"github.com/seed-0809debe/posture"
)

var configKey = []byte("e/config/current")

func init() {
	on(func(tx *Tx, e posture.Event, p posture.ConfigChanged) error {
		return tx.put(configKey, p)
	})
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
