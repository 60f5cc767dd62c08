package repocmd

// BootColumn is bootColumn, for the external tests (snapshots' BOOT
// column as verify boot leaves it).
var BootColumn = bootColumn
