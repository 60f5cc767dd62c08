package api

// What a point's snapshot modes and hooks say, for the faces that show
// them (the command line's listings, the console's pages).

// UnknownMode stands for an achieved snapshot mode a manifest does not
// record (written before coffer recorded it): claiming the requested mode
// instead could claim a quiesce that never happened.
const UnknownMode = "unknown"

// AchievedMode is the achieved snapshot mode to show.
func AchievedMode(achieved string) string {
	if achieved == "" {
		return UnknownMode
	}
	return achieved
}

// Consistency says what a point holds: the achieved snapshot mode, then
// the requested one when they differ (a fallback stands out in a
// listing), then how the application hooks went when any ran.
func Consistency(requested, achieved, hooks string) string {
	achieved = AchievedMode(achieved)
	out := achieved
	if requested != "" && requested != achieved {
		out += " (" + requested + " requested)"
	}
	switch hooks {
	case "ok":
		out += " + hooks"
	case "pre-failed":
		out += ", hooks failed"
	case "post-failed":
		out += " + hooks (post failed)"
	}
	return out
}
