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
