module github.com/tetherproxy/tether

go 1.26.8

require (
	github.com/caarlos0/env/v11 v11.4.2
	github.com/gobwas/httphead v0.1.0
	github.com/gobwas/ws v1.5.0
	github.com/tidwall/gjson v1.20.2
	go.uber.org/goleak v1.3.0
	go.uber.org/zap v1.28.0
)

require (
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.3.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
)
