package template

import "errors"

// ErrOutputTooLarge is returned when a template renders more than
// [MaxOutput] bytes.
var ErrOutputTooLarge = errors.New("template output too large")

// ErrRange is returned by Parse for a template that uses range.
var ErrRange = errors.New("range is not supported: the template data has nothing to iterate over")

// ErrRecursion is returned by Parse for a template that calls itself,
// directly or through other templates.
var ErrRecursion = errors.New("a template may not call itself: the template data has nothing to recurse over")
