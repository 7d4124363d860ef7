// Package e2e drives the azdispatch dashboard in a real browser: headless
// Chromium through chromedp, against Azurite, with the dashboard mounted
// under a prefix in an httptest server. It is a module of its own, so that
// chromedp stays out of the library's dependencies.
//
//	cd e2e && go test ./...
//
// The tests need Chromium (apt-get install chromium, or set
// AZDISPATCH_CHROMIUM to a Chrome or Chromium binary) and Node.js for
// Azurite; without either they fail, saying how to get it, and never skip.
// Each run writes a full-page screenshot of every view to screenshots/
// (AZDISPATCH_SCREENSHOTS names another folder), for a person to look at.
package e2e
