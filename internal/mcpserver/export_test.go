package mcpserver

// ExpiryScanEvery exposes the expiry scan period to the tests.
var ExpiryScanEvery = expiryScanEvery
