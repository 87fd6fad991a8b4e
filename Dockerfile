# One image for the api, the worker and the agent backend (the command picks the role).
FROM node:22-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npx tsx scripts/prisma-generate.ts
USER node
CMD ["npx", "tsx", "api/main.ts"]
