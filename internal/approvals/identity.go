package approvals

import (
	"os"
	"os/user"
	"strconv"
)

// OSLogin is the login of the account running this process, looked up by
// its uid in the system's user database. It never reads $USER or $LOGNAME:
// the environment is the caller's to set, and for the terminal and
// elicitation channels the OS account is the evidence of who decided.
func OSLogin() (string, error) {
	return LoginForUID(os.Getuid(), user.LookupId)
}

// LoginForUID resolves uid with lookup (user.LookupId outside tests). A
// uid with no account (common in containers) is refused: there is nobody
// to record as the decider.
func LoginForUID(uid int, lookup func(uid string) (*user.User, error)) (string, error) {
	u, err := lookup(strconv.Itoa(uid))
	if err != nil || u == nil || u.Username == "" {
		return "", invalid("this process runs as uid %d, which has no account in the system's user database (/etc/passwd), so it cannot say who is deciding; "+
			"run dw as a user with an account (in a container: add one, e.g. useradd), or decide in Slack. $USER is never used", uid)
	}
	return u.Username, nil
}
