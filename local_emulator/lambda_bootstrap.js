// The emulator's Node.js Lambda runtime: require the function's handler from its unpacked package and call it once.
// Run as `node lambda_bootstrap.js CODE_DIR HANDLER EVENT_FILE RESULT_FILE DEADLINE_MS` (local_emulator/lambda_runner.py).
// HANDLER is Lambda's `<file path without extension>.<export>`; the handler may return a promise or take a callback
// (https://docs.aws.amazon.com/lambda/latest/dg/nodejs-handler.html). The result, or Lambda's error object, goes to
// RESULT_FILE as {"result": ...} or {"error": ...}; whatever the function prints is its log.
'use strict';
const fs = require('fs');
const http = require('http');
const https = require('https');
const path = require('path');

const [codeDir, handler, eventPath, resultPath, deadlineMs] = process.argv.slice(2);

// On the emulator a custom resource's ResponseURL is plain HTTP on a loopback port (local_emulator/server.py).
// CDK's provider framework PUTs it with https.request({hostname, path}) and no port (aws-cdk-lib
// custom-resource-handlers, nodejs-entrypoint): send that one request over HTTP to the port the URL names.
const responseHost = process.env._LOCAL_RESPONSE_HOST;
const responsePort = Number(process.env._LOCAL_RESPONSE_PORT || 0);
const httpsRequest = https.request;
https.request = function (options, ...rest) {
  if (responseHost && options && typeof options === 'object' && options.hostname === responseHost) {
    return http.request({ ...options, protocol: 'http:', port: responsePort, agent: undefined }, ...rest);
  }
  return httpsRequest.call(this, options, ...rest);
};

// The AWS SDK addresses an S3 bucket as <bucket>.<endpoint host> (virtual-hosted style); with the emulator at
// localhost that is <bucket>.localhost, which RFC 6761 (section 6.3) reserves for the loopback address but the
// system resolver here does not answer: resolve it as the RFC says.
const dns = require('dns');
const lookup = dns.lookup;
dns.lookup = function (hostname, options, callback) {
  if (typeof hostname === 'string' && hostname.endsWith('.localhost')) {
    const cb = typeof options === 'function' ? options : callback;
    const all = options && typeof options === 'object' && options.all;
    return process.nextTick(() => (all ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4)));
  }
  return lookup.apply(this, arguments);
};

function finish(answer) {
  fs.writeFileSync(resultPath, JSON.stringify(answer));
}

function errorObject(err) {
  return {
    errorMessage: String(err && err.message !== undefined ? err.message : err),
    errorType: (err && err.name) || 'Error',
    stackTrace: err && err.stack ? String(err.stack).split('\n') : [],
  };
}

const context = {
  functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
  functionVersion: process.env.AWS_LAMBDA_FUNCTION_VERSION || '$LATEST',
  invokedFunctionArn: process.env._LOCAL_LAMBDA_FUNCTION_ARN || '',
  memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE || '128',
  awsRequestId: process.env._LOCAL_LAMBDA_REQUEST_ID || '',
  logGroupName: process.env.AWS_LAMBDA_LOG_GROUP_NAME || '',
  logStreamName: 'local',
  callbackWaitsForEmptyEventLoop: true,
  getRemainingTimeInMillis: () => Math.max(0, Number(deadlineMs) - Date.now()),
};

async function main() {
  const event = JSON.parse(fs.readFileSync(eventPath, 'utf8'));
  const dot = handler.lastIndexOf('.');
  const mod = require(path.join(codeDir, handler.slice(0, dot)));
  const fn = mod[handler.slice(dot + 1)];
  if (typeof fn !== 'function') throw new Error(`handler ${handler} is not a function of its module`);
  return await new Promise((resolve, reject) => {
    const returned = fn(event, context, (err, result) => (err ? reject(err) : resolve(result)));
    if (returned && typeof returned.then === 'function') returned.then(resolve, reject);
  });
}

main().then(
  (result) => finish({ result: result === undefined ? null : result }),
  (err) => {
    console.error(err);
    finish({ error: errorObject(err) });
  },
);
