/**
 * WORKSPACE_STORE=s3's layout in the bucket (core/platform/config.ts checkWorkspaceStore): S3_PREFIX is a "directory".
 * The sweeper's GC (core/domain/workspace-bucket.ts gc) lists every key under the prefix as this deployment's
 * workspaces; with `prod` as the prefix a neighbour's `prod-eu/<id>/...` in the same bucket lists under it too, as a
 * workspace without a `latest` pointer, and everything of it is deleted once older than S3_GC_GRACE_MS. The config
 * refuses such a prefix at start instead.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/platform/config.js';

const s3 = { WORKSPACE_STORE: 's3', S3_BUCKET: 'workspaces' };

describe('S3_PREFIX', () => {
  it('is refused without a trailing slash in s3 mode, naming the variable and the fix; a "directory" prefix, the default and the bucket root load', () => {
    expect(() => loadConfig({ ...s3, S3_PREFIX: 'prod' })).toThrow(/S3_PREFIX: must end with '\/' \(e\.g\. 'prod\/'\)/);
    expect(() => loadConfig({ ...s3, S3_PREFIX: 'tenants/prod' })).toThrow(/S3_PREFIX/);
    expect(loadConfig({ ...s3, S3_PREFIX: 'prod/' }).S3_PREFIX).toBe('prod/');
    expect(loadConfig(s3).S3_PREFIX).toBe('workspaces/');
    expect(loadConfig(s3, { S3_PREFIX: '' }).S3_PREFIX).toBe('');
    // posix mode never lists the bucket: the variable is not its concern.
    expect(loadConfig({ S3_PREFIX: 'prod' }).WORKSPACE_STORE).toBe('posix');
  });
});
