package api

// The inputs of the operations on the configuration and notifications
// (see inputs.go).

// ConfigNameParam names a configuration object.
type ConfigNameParam struct {
	Name string `path:"name" minLength:"1" maxLength:"255" example:"nightly" doc:"the object's name"`
}

// GetEffectiveConfigInput asks for the configuration in effect: it has
// no parameters.
type GetEffectiveConfigInput struct{}

// TestNotificationTargetInput names the notification target to test.
type TestNotificationTargetInput struct {
	ConfigNameParam
}
