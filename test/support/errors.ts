/** Catching the error a call must end with, typed, so a test can go on to check its fields. */
import { expect } from "vitest";
import { ApiError } from "../../src/model/errors.js";

type ErrorClass<E> = abstract new (...args: never[]) => E;

/** The `type` error that fn throws; anything else it throws propagates, and throwing nothing fails the test. */
export function thrownBy<E>(type: ErrorClass<E>, fn: () => unknown): E {
  try {
    fn();
  } catch (err) {
    if (err instanceof type) return err;
    throw err;
  }
  throw new Error(`expected a ${type.name} to be thrown`);
}

/** The `type` error the promise rejects with; fulfilling, or rejecting with anything else, fails the test. */
export async function rejectionOf<E>(type: ErrorClass<E>, promise: Promise<unknown>): Promise<E> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(type);
  return err as E;
}

/** The code of the ApiError a use case refuses with; the refusal's other fields are rarely what a domain test is about. */
export async function refusalCode(promise: Promise<unknown>): Promise<string> {
  return (await rejectionOf(ApiError, promise)).code;
}
