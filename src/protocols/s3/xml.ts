import { XMLBuilder, XMLParser } from 'fast-xml-parser';

const NAMESPACE = 'http://s3.amazonaws.com/doc/2006-03-01/';

const builder = new XMLBuilder({ ignoreAttributes: false, suppressEmptyNode: false, processEntities: true });

/** An S3 response body: `<Root xmlns="…">fields</Root>`, arrays as repeated elements, undefined left out. */
export function s3Xml(root: string, fields: Record<string, unknown>, namespaced = true): string {
  const body = namespaced ? { '@_xmlns': NAMESPACE, ...fields } : fields;
  return `<?xml version="1.0" encoding="UTF-8"?>\n${builder.build({ [root]: body })}`;
}

const parser = new XMLParser({
  ignoreAttributes: true,
  removeNSPrefix: true,
  parseTagValue: false,
  trimValues: true,
  // Elements S3 repeats are arrays even when a request holds one.
  isArray: (name) => name === 'Part' || name === 'Object',
  processEntities: true,
  // Numeric character references (&#34; for a quote: Go's encoder writes ETags so) are XML too.
  htmlEntities: true,
});

/** The XML body of a request (CompleteMultipartUpload, Delete…); undefined when it is not well-formed. */
export function parseS3Xml(text: string): Record<string, unknown> | undefined {
  try {
    const parsed = parser.parse(text, true) as Record<string, unknown>;
    return typeof parsed === 'object' && parsed !== null ? parsed : undefined;
  } catch {
    return undefined;
  }
}
