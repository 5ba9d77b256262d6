package deploy

import "github.com/tetherproxy/tether/internal/skipnote"

// skipped collects the tests skipped for a missing helm, so that TestMain
// can say so at the end (internal/skipnote).
var skipped skipnote.Notes
