// Generates src/gen from the server's OpenAPI document (npm run generate).
// The output is committed; CI regenerates it and fails on any difference.
import { defineConfig } from '@hey-api/openapi-ts';

export default defineConfig({
  input: '../../api/openapi.yaml',
  output: 'src/gen',
  plugins: ['@hey-api/client-fetch', '@hey-api/typescript', '@hey-api/sdk'],
});
