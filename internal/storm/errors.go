package storm

import "errors"

// ErrInvalidConfig wraps every reason Config.Validate, Scenario.Validate or
// Strategy.Validate refuses a value; the wrapped message names the field.
var ErrInvalidConfig = errors.New("invalid storm configuration")

// ErrNoReconnect is returned when a scenario's close code makes the real
// client stop (a permanent code): there is no storm to simulate.
var ErrNoReconnect = errors.New("close code stops the client instead of reconnecting")
