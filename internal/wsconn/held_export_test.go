package wsconn

// TakeoverBytes is what a connection with context takeover counts for its
// inflater's state.
const TakeoverBytes = takeoverBytes
