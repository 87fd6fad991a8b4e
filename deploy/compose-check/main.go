// compose-check loads docker-compose.yml the way `docker compose config` does — with compose-go, the library
// Docker Compose itself parses with: the Compose Specification's JSON schema, interpolation, merge keys,
// extends, profiles, and the consistency checks (every depends_on, secret, config and volume a service names
// must exist). It needs no Docker daemon, which these machines do not have. On success it prints the resolved
// project as JSON (all profiles enabled) for test/unit/compose.test.ts to check the deployment's invariants.
// Several files are merged in order, as `docker compose -f a.yml -f b.yml` merges them (the s3 override).
//
//	go run ./deploy/compose-check docker-compose.yml [docker-compose.s3.yml]
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: compose-check <docker-compose.yml> [override.yml ...]")
		os.Exit(2)
	}
	opts, err := cli.NewProjectOptions(
		os.Args[1:],
		cli.WithOsEnv,
		cli.WithDotEnv,
		cli.WithProfiles([]string{"*"}),
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		fail(err)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		fail(err)
	}
	out, err := project.MarshalJSON()
	if err != nil {
		fail(err)
	}
	os.Stdout.Write(out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "compose-check:", err)
	os.Exit(1)
}
