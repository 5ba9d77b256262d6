// Package config is tether's configuration: the Config struct whose field
// tags declare every TETHER_* variable (name, default, --help line), Load,
// which parses them from a map (packages never read the process
// environment) and reports every problem at once in one *Error, each naming
// its variable, the TETHER_ENV_FILE reader, the checks of a protocol preset,
// and the variable list that --help and docs/configuration.md are generated
// from. It builds nothing: cmd/tether turns a Config into the options of
// proxy and upstream.
//
// Concurrency: a Config is a value, read-only once Load returns; everything
// here is safe to call from any goroutine.
package config
