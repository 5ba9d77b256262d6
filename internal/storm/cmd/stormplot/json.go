package main

import (
	"bytes"
	"encoding/json"
	"os"
	"time"

	"github.com/tetherproxy/tether/internal/storm"
)

// jsonConfig records the parameters of a run; times are in seconds.
type jsonConfig struct {
	Command      string         `json:"command"`
	Clients      int            `json:"clients"`
	CapacityPerS int            `json:"capacity_per_s"`
	RetryAfterS  float64        `json:"retry_after_s"`
	RestartFloor float64        `json:"restart_floor_s"`
	Seed         uint64         `json:"seed"`
	BucketS      float64        `json:"bucket_s"`
	HorizonS     float64        `json:"horizon_s"`
	Scenarios    []jsonScenario `json:"scenarios"`
}

type jsonScenario struct {
	Name      string  `json:"name"`
	CloseCode int     `json:"close_code"`
	OutageS   float64 `json:"outage_s"`
}

// jsonResult is storm.Result with times in seconds. HalfS and AllConnectedS
// are null when the run hit the horizon first.
type jsonResult struct {
	Scenario      string   `json:"scenario"`
	Strategy      string   `json:"strategy"`
	TetherDefault bool     `json:"tether_default"`
	PeakPerS      int      `json:"peak_per_s"`
	PeakAtS       float64  `json:"peak_at_s"`
	HalfS         *float64 `json:"half_connected_s"`
	AllConnectedS *float64 `json:"all_connected_s"`
	Connected     int      `json:"connected"`
	Attempts      int      `json:"attempts"`
	Refused       int      `json:"refused"`
	Rejected      int      `json:"rejected_503"`
	Arrivals      []int    `json:"arrivals_per_s"`
	Accepted      []int    `json:"accepted_per_s"`
}

// writeJSON writes one object: the configuration, then "results" with one
// result per line, so that a regenerated file diffs row by row.
func writeJSON(path string, o options, scenarios []storm.Scenario, results []storm.Result) error {
	cfg, err := json.MarshalIndent(configJSON(o, scenarios), "", "  ")
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.WriteString("{\n\"config\": ")
	b.Write(cfg)
	b.WriteString(",\n\"results\": [\n")
	for i, r := range results {
		line, err := json.Marshal(resultJSON(r))
		if err != nil {
			return err
		}
		b.Write(line)
		if i < len(results)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]\n}\n")
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func configJSON(o options, scenarios []storm.Scenario) jsonConfig {
	c := jsonConfig{
		Command:      o.commandRan,
		Clients:      o.cfg.Clients,
		CapacityPerS: o.cfg.Capacity,
		RetryAfterS:  o.cfg.RetryAfter.Seconds(),
		RestartFloor: o.cfg.Policy.RestartFloor.Seconds(),
		Seed:         o.cfg.Seed,
		BucketS:      storm.Bucket.Seconds(),
		HorizonS:     o.cfg.Horizon.Seconds(),
	}
	for _, s := range scenarios {
		c.Scenarios = append(c.Scenarios, jsonScenario{Name: s.Name, CloseCode: s.CloseCode, OutageS: s.Outage.Seconds()})
	}
	return c
}

func resultJSON(r storm.Result) jsonResult {
	j := jsonResult{
		Scenario:      r.Scenario,
		Strategy:      r.Strategy,
		TetherDefault: r.TetherDefault,
		PeakPerS:      r.Peak,
		PeakAtS:       r.PeakAt.Seconds(),
		Connected:     r.Connected,
		Attempts:      r.Attempts,
		Refused:       r.Refused,
		Rejected:      r.Rejected,
		Arrivals:      r.Arrivals,
		Accepted:      r.Accepted,
	}
	if r.HalfRecovered() {
		s := secondsMs(r.Half)
		j.HalfS = &s
	}
	if r.Recovered() {
		s := secondsMs(r.Recovery)
		j.AllConnectedS = &s
	}
	return j
}

// secondsMs rounds to the millisecond: virtual nanoseconds are noise in a
// report.
func secondsMs(d time.Duration) float64 {
	return d.Round(time.Millisecond).Seconds()
}
