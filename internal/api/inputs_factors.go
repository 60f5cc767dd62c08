package api

// The inputs of second factors.

// EnrolTOTPInput starts a TOTP enrolment of a user.
type EnrolTOTPInput struct {
	UserParam
}

// ConfirmTOTPInput completes a TOTP enrolment with the app's first code.
type ConfirmTOTPInput struct {
	UserParam
	Body CodeRequest
}

// SecondStepInput takes the second step of the caller's sign-in.
type SecondStepInput struct {
	Body CodeRequest
}

// RegisterSecurityKeyInput completes a key's registration.
type RegisterSecurityKeyInput struct {
	UserParam
	Body SecurityKeyRegistration
}

// SecurityKeyParam names a user's key by its credential ID.
type SecurityKeyParam struct {
	UserParam
	ID string `path:"id" maxLength:"1400"`
}

// SecurityKeySignInInput takes the second step of a sign-in with a key.
type SecurityKeySignInInput struct {
	Body SecurityKeyAnswer
}

// BeginSecurityKeySignInInput starts the second step of the caller's
// sign-in with a key.
type BeginSecurityKeySignInInput struct{}
