// Package status renders what tether knows about its sessions: the JSON
// document of /status on the admin server (Doc, built from proxy.Status),
// the HTML status page at / and the table `tether status` prints. It holds
// no state and does no I/O beyond the writer it is given; cmd/tether serves
// the page and fetches the document.
//
// Like the metrics, a Doc carries no message content and no credentials.
//
// Concurrency: Build, HTML and Write are pure functions of their arguments,
// safe from any goroutine.
package status
