package config

import (
	"errors"
	"fmt"
	"math"
)

// OptionalSize is a size variable whose absence means something else than
// any value (TETHER_MEMORY_LIMIT: derived from the cgroup limit).
type OptionalSize struct {
	Size ByteSize
	Set  bool
}

// UnmarshalText parses the size as ByteSize does.
func (o *OptionalSize) UnmarshalText(text []byte) error {
	if err := o.Size.UnmarshalText(text); err != nil {
		return err
	}
	o.Set = true
	return nil
}

// validateMemory checks the variables of the budget: a limit set must
// hold every session's share.
func (c Config) validateMemory() error {
	errs := []error{sizeAbove0("TETHER_MEMORY_SHARE_BYTES", c.MemoryShareBytes)}
	if c.MemoryLimit.Set {
		errs = append(errs, sizeAbove0("TETHER_MEMORY_LIMIT", c.MemoryLimit.Size))
		if c.MemoryLimit.Size > 0 {
			errs = append(errs, c.SharesFit(c.MemoryLimit.Size, ""))
		}
	}
	return errors.Join(errs...)
}

// SharesFit reports a limit below what the sessions' shares need
// (TETHER_MAX_SESSIONS × TETHER_MEMORY_SHARE_BYTES), naming the
// variables; how says where a limit the operator did not set came from.
func (c Config) SharesFit(limit ByteSize, how string) error {
	if c.MemoryShareBytes <= 0 || c.MaxSessions <= 0 {
		return nil // reported by their own checks
	}
	need := c.MemoryShareBytes * ByteSize(c.MaxSessions)
	if c.MemoryShareBytes > ByteSize(math.MaxInt64)/ByteSize(c.MaxSessions) || limit < need {
		return &problem{name: "TETHER_MEMORY_LIMIT",
			msg: fmt.Sprintf("%s%s is below TETHER_MAX_SESSIONS × TETHER_MEMORY_SHARE_BYTES = %d × %s = %s: raise it, or lower one of those",
				limit, how, c.MaxSessions, c.MemoryShareBytes, need),
			related: []string{"TETHER_MAX_SESSIONS", "TETHER_MEMORY_SHARE_BYTES"}}
	}
	return nil
}
