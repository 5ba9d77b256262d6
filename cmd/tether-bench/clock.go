package main

import "time"

// The feed stamps and the sink reads the same clock, in the same process: Unix
// nanoseconds derived from the monotonic clock, so a wall-clock step during a
// run cannot show up as latency.
var (
	epoch     = time.Now()
	epochUnix = epoch.UnixNano()
)

func nowNanos() int64 { return epochUnix + int64(time.Since(epoch)) }
