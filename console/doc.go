// Package console is postured's web console for admins: the fleet, an
// identity's posture and timeline, explain and the posture checks, as
// server-rendered pages (html/template and assets embedded with go:embed,
// no build step, no CDN).
//
// It holds no evaluation logic and no state of its own: pages read through
// the same store interfaces the APIs use, and signing in, MFA, the session
// check and signing out go through the management API's own operations,
// called in process, so that the console's sessions are management API
// sessions with the same limits, lockouts and idle timeout. The session
// token lives in an HttpOnly, Secure, SameSite=Strict cookie; every form
// carries a CSRF token; pages are served with a strict
// Content-Security-Policy (no inline script or style).
//
// It may import the root package, net/http and html/template; not the
// other adapters.
package console
