// Requests, replies and events are built from and parsed into `JSONValue`, so every user of the
// protocol (locationctl, the front-ends, the tests) sees the JSON module through this one.
@_exported import JSON
