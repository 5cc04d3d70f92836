package main

import (
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
)

// defaultTargets are the platforms a release is built for.
var defaultTargets = []string{"linux/amd64", "linux/arm64", "darwin/arm64"}

// Options say what to build, from where and to where.
type Options struct {
	Root    string   // repository root (holds go.mod, cmd/postured and deploy/)
	Out     string   // output directory: created, must be empty or absent
	Targets []string // GOOS/GOARCH pairs
}

// Paths inside the Debian package.
const (
	debBinary   = "/usr/bin/postured"
	debUnit     = "/usr/lib/systemd/system/postured.service"
	debSysusers = "/usr/lib/sysusers.d/postured.conf"
)

// Release builds the binaries of the checked-out commit (go build -trimpath
// -buildvcs=true, so that `postured version` reports the module version and
// the revision), a .deb for each Linux target and SHA256SUMS. It returns the
// artifacts' paths. Uncommitted changes are not in a release.
func Release(ctx context.Context, o Options) ([]string, error) {
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return nil, err
	}
	o.Out = out
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	if ents, err := os.ReadDir(o.Out); err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	} else if len(ents) > 0 {
		return nil, fmt.Errorf("output directory %s is not empty", o.Out)
	}
	src, cleanup, err := checkout(ctx, o.Root)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	o.Root = src
	var arts []string
	for _, t := range o.Targets {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(t), "/")
		if !ok || goos == "" || goarch == "" {
			return nil, fmt.Errorf("target %q: want GOOS/GOARCH", t)
		}
		bin, ver, err := buildBinary(ctx, o, goos, goarch)
		if err != nil {
			return nil, err
		}
		arts = append(arts, bin)
		if goos != "linux" {
			continue
		}
		deb, err := buildDeb(o, bin, ver, goarch)
		if err != nil {
			return nil, err
		}
		arts = append(arts, deb)
	}
	sums, err := writeSums(o.Out, arts)
	if err != nil {
		return nil, err
	}
	return append(arts, sums), nil
}

// checkout clones the commit checked out in root into a temporary
// directory and returns it. The toolchain stamps the module version and the
// revision only in a repository whose .git is a directory, which a git
// worktree's is not; a clone also leaves uncommitted changes out.
func checkout(ctx context.Context, root string) (dir string, cleanup func(), err error) {
	git := func(dir string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	rev, err := git(root, "rev-parse", "HEAD")
	if err != nil {
		return "", nil, fmt.Errorf("a release is built from a git checkout: %w", err)
	}
	if st, err := git(root, "status", "--porcelain", "--untracked-files=no"); err == nil && st != "" {
		fmt.Fprintf(os.Stderr, "release: building commit %.12s; uncommitted changes are not in it\n", rev)
	}
	tmp, err := os.MkdirTemp("", "postured-release")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	src := filepath.Join(tmp, "src")
	if _, err := git(root, "clone", "--quiet", "--shared", "--no-checkout", ".", src); err != nil {
		cleanup()
		return "", nil, err
	}
	if _, err := git(src, "checkout", "--quiet", "--detach", rev); err != nil {
		cleanup()
		return "", nil, err
	}
	return src, cleanup, nil
}

// buildBinary cross-compiles postured and returns its path and the module
// version the toolchain stamped into it.
func buildBinary(ctx context.Context, o Options, goos, goarch string) (path, version string, err error) {
	tmp := filepath.Join(o.Out, fmt.Sprintf("postured-%s-%s", goos, goarch))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=true", "-ldflags", "-s -w", "-o", tmp, "./cmd/postured")
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build %s/%s: %w\n%s", goos, goarch, err, out)
	}
	info, err := buildinfo.ReadFile(tmp)
	if err != nil {
		return "", "", fmt.Errorf("build information of %s: %w", tmp, err)
	}
	version = info.Main.Version
	if version == "" || version == "(devel)" {
		return "", "", fmt.Errorf("%s has no module version: build from a git checkout", tmp)
	}
	path = filepath.Join(o.Out, fmt.Sprintf("postured_%s_%s_%s", version, goos, goarch))
	if err := os.Rename(tmp, path); err != nil {
		return "", "", err
	}
	return path, version, nil
}

// buildDeb packages a Linux binary with the systemd unit (ExecStart pointing
// at the packaged binary) and the sysusers.d entry; postinst creates the
// user.
func buildDeb(o Options, bin, version, goarch string) (string, error) {
	deploy := filepath.Join(o.Root, "deploy")
	info := nfpm.WithDefaults(&nfpm.Info{
		Name:       "postured",
		Arch:       goarch,
		Platform:   "linux",
		Version:    version,
		Section:    "net",
		Priority:   "optional",
		Maintainer: "postured maintainers <postured@localhost>",
		Description: "posture-evaluation controller for zero-trust networks\n" +
			"postured decides whether an endpoint may reach a network service, from\n" +
			"service policies and posture checks (OS, MAC, MFA, processes, domain).\n" +
			"It speaks the OpenZiti Edge Client and management APIs and keeps every\n" +
			"fact in an event log (NATS JetStream, embedded by default).",
		Homepage: "https://github.com/seed-0809debe/posture",
		Overridables: nfpm.Overridables{
			Contents: files.Contents{
				{Source: bin, Destination: debBinary, FileInfo: &files.ContentFileInfo{Mode: 0o755}},
				{Source: filepath.Join(deploy, "systemd", "postured.service"), Destination: debUnit, FileInfo: &files.ContentFileInfo{Mode: 0o644}},
				{Source: filepath.Join(deploy, "systemd", "postured.sysusers"), Destination: debSysusers, FileInfo: &files.ContentFileInfo{Mode: 0o644}},
			},
			// systemd-sysusers creates the user; adduser where it is missing.
			Depends: []string{"systemd | adduser"},
			Scripts: nfpm.Scripts{
				PostInstall: filepath.Join(deploy, "debian", "postinst"),
				PreRemove:   filepath.Join(deploy, "debian", "prerm"),
				PostRemove:  filepath.Join(deploy, "debian", "postrm"),
			},
		},
	})
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return "", fmt.Errorf("deb %s: %w", goarch, err)
	}
	pkgr, err := nfpm.Get("deb")
	if err != nil {
		return "", err
	}
	path := filepath.Join(o.Out, pkgr.ConventionalFileName(info))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := pkgr.Package(info, f); err != nil {
		f.Close()
		return "", fmt.Errorf("deb %s: %w", goarch, err)
	}
	return path, f.Close()
}

// writeSums writes SHA256SUMS (sha256sum's format) over the artifacts.
func writeSums(dir string, arts []string) (string, error) {
	var lines []string
	for _, a := range arts {
		sum, err := fileSHA256(a)
		if err != nil {
			return "", err
		}
		lines = append(lines, sum+"  "+filepath.Base(a)+"\n")
	}
	sort.Strings(lines)
	path := filepath.Join(dir, "SHA256SUMS")
	return path, os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", errors.Join(fmt.Errorf("checksum of %s", path), err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
