package sqlcat

// PruneSteps are PruneHistory's statements, for the test of their plans.
var PruneSteps = pruneSteps
